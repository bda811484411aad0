package demo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// database is the service's state behind a connection pool. Each method
// acquires one pooled connection for its whole duration; when none can be
// acquired within the acquire timeout it fails with errOverloaded (or
// errUnavailable when connections cannot be opened at all).
type database interface {
	challenges(ctx context.Context) ([]Challenge, error)
	// player returns errPlayerNotFound for a player whose goals were never
	// initialized.
	player(ctx context.Context, playerID string) (playerState, error)
	// initializePlayer creates the player and a goal per challenge, unless
	// they exist; created tells which.
	initializePlayer(ctx context.Context, playerID string) (st playerState, created bool, err error)
	setActiveChallenge(ctx context.Context, playerID, challengeID string) error
	// claimReward marks the goal claimed: errAlreadyClaimed the second time.
	claimReward(ctx context.Context, playerID, challengeID string) (time.Time, error)
	insertStat(ctx context.Context, e statEvent) (uint64, error)
	insertLogin(ctx context.Context, e loginEvent) (uint64, error)
	poolStat() poolStat
	kind() string
	close()
}

// poolStat is a snapshot of a pool, filled from simpool.Stat or pgxpool.Stat.
type poolStat struct {
	MaxConns, TotalConns, IdleConns, AcquiredConns, ConstructingConns int64
	Acquires, WaitedAcquires, AcquireTimeouts, AcquireErrors          int64
	NewConns                                                          int64
	AcquireWait, ConnSetup                                            time.Duration
}

// store adds the lazily filled caches in front of a database: the challenge
// catalogue and per-player state. A cache miss costs an extra query, so cold
// requests are slower. Writes go to the database and then update the cache.
// Safe for concurrent use.
type store struct {
	db        database
	catalogue valueCache[[]Challenge]
	players   *playerCache
}

func newStore(db database, ttl time.Duration, maxPlayers int, now func() time.Time) *store {
	return &store{
		db:        db,
		catalogue: valueCache[[]Challenge]{ttl: ttl, now: now},
		players:   newPlayerCache(ttl, maxPlayers, now),
	}
}

func (s *store) challenges(ctx context.Context) ([]Challenge, error) {
	if cs, ok := s.catalogue.get(); ok {
		return cs, nil
	}
	cs, err := s.db.challenges(ctx)
	if err != nil {
		return nil, err
	}
	s.catalogue.put(cs)
	return cs, nil
}

func (s *store) challenge(ctx context.Context, id string) (Challenge, error) {
	cs, err := s.challenges(ctx)
	if err != nil {
		return Challenge{}, err
	}
	for _, c := range cs {
		if c.ID == id {
			return c, nil
		}
	}
	return Challenge{}, errChallengeNotFound
}

func (s *store) player(ctx context.Context, id string) (playerState, error) {
	if p, ok := s.players.get(id); ok {
		return p, nil
	}
	p, err := s.db.player(ctx, id)
	if err != nil {
		return playerState{}, err
	}
	s.players.put(id, p)
	return p, nil
}

func (s *store) initializeGoals(ctx context.Context, id string) (playerState, bool, error) {
	if p, ok := s.players.get(id); ok {
		return p, false, nil
	}
	p, created, err := s.db.initializePlayer(ctx, id)
	if err != nil {
		return playerState{}, false, err
	}
	s.players.put(id, p)
	return p, created, nil
}

func (s *store) setActiveChallenge(ctx context.Context, id, challengeID string) (playerState, error) {
	if _, err := s.challenge(ctx, challengeID); err != nil {
		return playerState{}, err
	}
	p, err := s.player(ctx, id)
	if err != nil {
		return playerState{}, err
	}
	if err := s.db.setActiveChallenge(ctx, id, challengeID); err != nil {
		return playerState{}, err
	}
	p = p.withActive(challengeID)
	s.players.put(id, p)
	return p, nil
}

type claim struct {
	Challenge Challenge
	ClaimedAt time.Time
}

func (s *store) claimReward(ctx context.Context, id, challengeID string) (claim, error) {
	c, err := s.challenge(ctx, challengeID)
	if err != nil {
		return claim{}, err
	}
	p, err := s.player(ctx, id)
	if err != nil {
		return claim{}, err
	}
	if g, ok := p.goal(challengeID); ok && g.Claimed {
		return claim{}, errAlreadyClaimed // claims are final: a cached "claimed" is never stale
	}
	at, err := s.db.claimReward(ctx, id, challengeID)
	if err != nil {
		return claim{}, err
	}
	s.players.put(id, p.withClaimed(challengeID))
	return claim{Challenge: c, ClaimedAt: at}, nil
}

// cacheStat counts lookups of one cache.
type cacheStat struct {
	Hits, Misses, Entries int64
}

func (s *store) cacheStats() map[string]cacheStat {
	return map[string]cacheStat{
		"challenges": s.catalogue.stat(),
		"players":    s.players.stat(),
	}
}

// valueCache holds one value for ttl (ttl <= 0 disables it). Safe for
// concurrent use.
type valueCache[T any] struct {
	ttl          time.Duration
	now          func() time.Time
	hits, misses atomic.Int64

	mu      sync.Mutex
	val     T
	expires time.Time
	set     bool
}

func (c *valueCache[T]) get() (T, bool) {
	c.mu.Lock()
	v, ok := c.val, c.set && c.now().Before(c.expires)
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return v, ok
}

func (c *valueCache[T]) put(v T) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	c.val, c.expires, c.set = v, c.now().Add(c.ttl), true
	c.mu.Unlock()
}

func (c *valueCache[T]) stat() cacheStat {
	c.mu.Lock()
	var n int64
	if c.set && c.now().Before(c.expires) {
		n = 1
	}
	c.mu.Unlock()
	return cacheStat{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: n}
}

const playerShards = 16

// playerCache maps player IDs to state for ttl, in shards to keep lock
// contention low. When a shard is full an arbitrary entry is evicted, so
// memory stays bounded however many players a test invents. Safe for
// concurrent use.
type playerCache struct {
	ttl          time.Duration
	perShard     int
	now          func() time.Time
	hits, misses atomic.Int64
	shards       [playerShards]playerShard
}

type playerShard struct {
	mu sync.Mutex
	m  map[string]cachedPlayer
}

type cachedPlayer struct {
	st      playerState
	expires time.Time
}

func newPlayerCache(ttl time.Duration, maxEntries int, now func() time.Time) *playerCache {
	c := &playerCache{ttl: ttl, perShard: max(1, maxEntries/playerShards), now: now}
	for i := range c.shards {
		c.shards[i].m = make(map[string]cachedPlayer)
	}
	return c
}

func (c *playerCache) shard(id string) *playerShard {
	// FNV-1a, inlined: no allocation on the hot path.
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return &c.shards[h%playerShards]
}

func (c *playerCache) get(id string) (playerState, bool) {
	sh := c.shard(id)
	sh.mu.Lock()
	e, ok := sh.m[id]
	if ok && !c.now().Before(e.expires) {
		delete(sh.m, id)
		ok = false
	}
	sh.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return e.st, ok
}

func (c *playerCache) put(id string, st playerState) {
	if c.ttl <= 0 {
		return
	}
	sh := c.shard(id)
	sh.mu.Lock()
	if _, ok := sh.m[id]; !ok && len(sh.m) >= c.perShard {
		for k := range sh.m {
			delete(sh.m, k)
			break
		}
	}
	sh.m[id] = cachedPlayer{st: st, expires: c.now().Add(c.ttl)}
	sh.mu.Unlock()
}

func (c *playerCache) stat() cacheStat {
	var n int64
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += int64(len(sh.m))
		sh.mu.Unlock()
	}
	return cacheStat{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: n}
}
