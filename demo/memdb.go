package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/xk6-regime/xk6-regime/demo/simpool"
)

// memDB is the embedded default database: data in memory, reached through a
// simulated remote connection pool (simpool) so that latency behaves like a
// remote database's: connections cost ConnSetup to open, every query holds
// its connection for queryTime plus rowTime per row.
//
// Safe for concurrent use: one mutex guards the tables, which are only ever
// touched after the simulated query time, never while waiting.
type memDB struct {
	pool      *simpool.Pool
	queryTime time.Duration
	rowTime   time.Duration
	now       func() time.Time

	mu       sync.Mutex
	players  map[string]*memPlayer
	eventSeq uint64
	stats    uint64
	logins   uint64
}

// memPlayer is one player's row plus its goals, compactly: claims as a bit
// set over the catalogue (which has at most 64 entries).
type memPlayer struct {
	active   int8 // index into catalogue, -1 for none
	claimed  uint64
	progress []int32
}

var _ database = (*memDB)(nil)

type memDBConfig struct {
	MaxConns       int
	ConnSetup      time.Duration
	QueryTime      time.Duration
	RowTime        time.Duration
	AcquireTimeout time.Duration
	// Sleep and Now are injected by tests; nil means real time.
	Sleep func(context.Context, time.Duration) error
	Now   func() time.Time
}

func newMemDB(cfg memDBConfig) (*memDB, error) {
	if len(catalogue) > 64 {
		return nil, fmt.Errorf("catalogue has %d challenges: the in-memory database holds at most 64", len(catalogue))
	}
	pool, err := simpool.New(simpool.Config{
		MaxConns:       cfg.MaxConns,
		ConnSetup:      cfg.ConnSetup,
		AcquireTimeout: cfg.AcquireTimeout,
		Sleep:          cfg.Sleep,
		Now:            cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &memDB{
		pool:      pool,
		queryTime: cfg.QueryTime,
		rowTime:   cfg.RowTime,
		now:       now,
		players:   make(map[string]*memPlayer),
	}, nil
}

func (d *memDB) kind() string { return "simulated" }

// query acquires a connection, holds it for the cost of the given number of
// queries and rows, runs fn on the tables, and releases the connection.
func (d *memDB) query(ctx context.Context, queries, rows int, fn func() error) error {
	c, err := d.pool.Acquire(ctx)
	switch {
	case errors.Is(err, simpool.ErrTimeout):
		return errOverloaded
	case errors.Is(err, simpool.ErrClosed):
		return errUnavailable
	case err != nil:
		return err
	}
	defer c.Release()
	cost := time.Duration(queries)*d.queryTime + time.Duration(rows)*d.rowTime
	if err := c.Hold(ctx, cost); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return fn()
}

func (d *memDB) challenges(ctx context.Context) ([]Challenge, error) {
	var out []Challenge
	err := d.query(ctx, 1, len(catalogue), func() error {
		out = append([]Challenge(nil), catalogue...)
		return nil
	})
	return out, err
}

// stateLocked renders a player's state; d.mu must be held.
func (d *memDB) stateLocked(id string, p *memPlayer) playerState {
	st := playerState{PlayerID: id, Goals: make([]Goal, len(catalogue))}
	if p.active >= 0 {
		st.ActiveChallengeID = catalogue[p.active].ID
	}
	for i, c := range catalogue {
		st.Goals[i] = Goal{
			ChallengeID: c.ID,
			Progress:    int(p.progress[i]),
			GoalCount:   c.GoalCount,
			Claimed:     p.claimed&(1<<i) != 0,
		}
	}
	return st
}

func (d *memDB) player(ctx context.Context, id string) (playerState, error) {
	var st playerState
	err := d.query(ctx, 1, len(catalogue), func() error {
		p, ok := d.players[id]
		if !ok {
			return errPlayerNotFound
		}
		st = d.stateLocked(id, p)
		return nil
	})
	return st, err
}

func (d *memDB) initializePlayer(ctx context.Context, id string) (playerState, bool, error) {
	var (
		st      playerState
		created bool
	)
	// Insert the player, insert its goals, read them back.
	err := d.query(ctx, 3, 1+2*len(catalogue), func() error {
		p, ok := d.players[id]
		if !ok {
			p = &memPlayer{active: -1, progress: make([]int32, len(catalogue))}
			d.players[id] = p
			created = true
		}
		st = d.stateLocked(id, p)
		return nil
	})
	return st, created, err
}

func catalogueIndex(challengeID string) int {
	for i, c := range catalogue {
		if c.ID == challengeID {
			return i
		}
	}
	return -1
}

func (d *memDB) setActiveChallenge(ctx context.Context, id, challengeID string) error {
	i := catalogueIndex(challengeID)
	if i < 0 {
		return errChallengeNotFound
	}
	return d.query(ctx, 1, 1, func() error {
		p, ok := d.players[id]
		if !ok {
			return errPlayerNotFound
		}
		p.active = int8(i)
		return nil
	})
}

func (d *memDB) claimReward(ctx context.Context, id, challengeID string) (time.Time, error) {
	i := catalogueIndex(challengeID)
	if i < 0 {
		return time.Time{}, errChallengeNotFound
	}
	var at time.Time
	err := d.query(ctx, 1, 1, func() error {
		p, ok := d.players[id]
		if !ok {
			return errPlayerNotFound
		}
		if p.claimed&(1<<i) != 0 {
			return errAlreadyClaimed
		}
		p.claimed |= 1 << i
		at = d.now()
		return nil
	})
	return at, err
}

// Events are counted, not kept: a long load test must not grow memory.
func (d *memDB) insertStat(ctx context.Context, _ statEvent) (uint64, error) {
	var id uint64
	err := d.query(ctx, 1, 1, func() error {
		d.eventSeq++
		d.stats++
		id = d.eventSeq
		return nil
	})
	return id, err
}

func (d *memDB) insertLogin(ctx context.Context, _ loginEvent) (uint64, error) {
	var id uint64
	err := d.query(ctx, 1, 1, func() error {
		d.eventSeq++
		d.logins++
		id = d.eventSeq
		return nil
	})
	return id, err
}

func (d *memDB) poolStat() poolStat {
	s := d.pool.Stat()
	return poolStat{
		MaxConns:          int64(s.MaxConns),
		TotalConns:        int64(s.TotalConns),
		IdleConns:         int64(s.IdleConns),
		AcquiredConns:     int64(s.AcquiredConns),
		ConstructingConns: int64(s.ConstructingConns),
		Acquires:          s.Acquires,
		WaitedAcquires:    s.WaitedAcquires,
		AcquireTimeouts:   s.AcquireTimeouts,
		AcquireErrors:     s.CanceledAcquires,
		NewConns:          s.NewConns,
		AcquireWait:       s.AcquireWait,
		ConnSetup:         s.ConnSetup,
	}
}

func (d *memDB) close() { d.pool.Close() }
