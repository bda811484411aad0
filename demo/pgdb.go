package demo

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgDB is the PostgreSQL database, through a pgxpool that starts empty
// (MinConns 0) like the simulated one. Safe for concurrent use.
type pgDB struct {
	pool           *pgxpool.Pool
	acquireTimeout time.Duration

	acquireTimeouts atomic.Int64
	acquireErrors   atomic.Int64
	connSetupNanos  atomic.Int64
}

var _ database = (*pgDB)(nil)

const pgSchema = `
CREATE TABLE IF NOT EXISTS demo_challenges (
	id            text PRIMARY KEY,
	position      int  NOT NULL,
	name          text NOT NULL,
	goal_count    int  NOT NULL,
	reward_kind   text NOT NULL,
	reward_amount int  NOT NULL
);
CREATE TABLE IF NOT EXISTS demo_players (
	id                  text PRIMARY KEY,
	active_challenge_id text REFERENCES demo_challenges (id),
	created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS demo_player_goals (
	player_id    text NOT NULL REFERENCES demo_players (id),
	challenge_id text NOT NULL REFERENCES demo_challenges (id),
	progress     int  NOT NULL DEFAULT 0,
	claimed_at   timestamptz,
	PRIMARY KEY (player_id, challenge_id)
);
CREATE TABLE IF NOT EXISTS demo_stat_events (
	id          bigserial PRIMARY KEY,
	player_id   text NOT NULL,
	stat        text NOT NULL,
	value       double precision NOT NULL,
	occurred_at timestamptz NOT NULL,
	received_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS demo_login_events (
	id          bigserial PRIMARY KEY,
	player_id   text NOT NULL,
	platform    text NOT NULL,
	session_id  text NOT NULL,
	occurred_at timestamptz NOT NULL,
	received_at timestamptz NOT NULL DEFAULT now()
);`

// openPostgres creates the schema and seeds the catalogue over a connection
// of its own, then returns an empty pool: the cold start stays visible.
func openPostgres(ctx context.Context, url string, maxConns int, acquireTimeout time.Duration) (*pgDB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if err := migrate(ctx, cfg.ConnConfig.Copy()); err != nil {
		return nil, err
	}
	d := &pgDB{acquireTimeout: acquireTimeout}
	cfg.MaxConns = int32(maxConns)
	cfg.MinConns = 0
	cfg.MinIdleConns = 0
	cfg.ConnConfig.Tracer = connectTimer{d}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	d.pool = pool
	return d, nil
}

func migrate(ctx context.Context, cc *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Serialize concurrent starts: CREATE TABLE IF NOT EXISTS races otherwise.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7283548)`); err != nil {
			return fmt.Errorf("schema lock: %w", err)
		}
		if _, err := tx.Exec(ctx, pgSchema); err != nil {
			return fmt.Errorf("creating schema: %w", err)
		}
		for i, c := range catalogue {
			_, err := tx.Exec(ctx, `
INSERT INTO demo_challenges (id, position, name, goal_count, reward_kind, reward_amount)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET position = $2, name = $3, goal_count = $4, reward_kind = $5, reward_amount = $6`,
				c.ID, i, c.Name, c.GoalCount, c.Reward.Kind, c.Reward.Amount)
			if err != nil {
				return fmt.Errorf("seeding challenge %q: %w", c.ID, err)
			}
		}
		return nil
	})
}

// connectTimer adds up the time pool connections take to open.
type connectTimer struct{ d *pgDB }

type connectStartKey struct{}

func (connectTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (connectTimer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (connectTimer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return context.WithValue(ctx, connectStartKey{}, time.Now())
}

func (t connectTimer) TraceConnectEnd(ctx context.Context, _ pgx.TraceConnectEndData) {
	if start, ok := ctx.Value(connectStartKey{}).(time.Time); ok {
		t.d.connSetupNanos.Add(int64(time.Since(start)))
	}
}

func (d *pgDB) kind() string { return "postgres" }

// acquire waits at most acquireTimeout for a connection.
func (d *pgDB) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, d.acquireTimeout)
	defer cancel()
	c, err := d.pool.Acquire(actx)
	switch {
	case err == nil:
		return c, nil
	case ctx.Err() != nil:
		d.acquireErrors.Add(1)
		return nil, ctx.Err()
	case actx.Err() != nil:
		d.acquireTimeouts.Add(1)
		return nil, errOverloaded
	default:
		d.acquireErrors.Add(1)
		return nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
}

func (d *pgDB) challenges(ctx context.Context) ([]Challenge, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	rows, err := c.Query(ctx, `SELECT id, name, goal_count, reward_kind, reward_amount FROM demo_challenges ORDER BY position`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Challenge, error) {
		var ch Challenge
		err := r.Scan(&ch.ID, &ch.Name, &ch.GoalCount, &ch.Reward.Kind, &ch.Reward.Amount)
		return ch, err
	})
}

func loadPlayer(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, id string,
) (playerState, error) {
	rows, err := q.Query(ctx, `
SELECT p.active_challenge_id, g.challenge_id, g.progress, c.goal_count, g.claimed_at IS NOT NULL
FROM demo_players p
LEFT JOIN demo_player_goals g ON g.player_id = p.id
LEFT JOIN demo_challenges c ON c.id = g.challenge_id
WHERE p.id = $1
ORDER BY c.position`, id)
	if err != nil {
		return playerState{}, err
	}
	st := playerState{PlayerID: id}
	found := false
	for rows.Next() {
		found = true
		var (
			active, challengeID *string
			progress, goalCount *int
			claimed             bool
		)
		if err := rows.Scan(&active, &challengeID, &progress, &goalCount, &claimed); err != nil {
			return playerState{}, err
		}
		if active != nil {
			st.ActiveChallengeID = *active
		}
		if challengeID != nil {
			st.Goals = append(st.Goals, Goal{ChallengeID: *challengeID, Progress: *progress, GoalCount: *goalCount, Claimed: claimed})
		}
	}
	if err := rows.Err(); err != nil {
		return playerState{}, err
	}
	if !found {
		return playerState{}, errPlayerNotFound
	}
	return st, nil
}

func (d *pgDB) player(ctx context.Context, id string) (playerState, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return playerState{}, err
	}
	defer c.Release()
	return loadPlayer(ctx, c, id)
}

func (d *pgDB) initializePlayer(ctx context.Context, id string) (playerState, bool, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return playerState{}, false, err
	}
	defer c.Release()
	var (
		st      playerState
		created bool
	)
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO demo_players (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, id)
		if err != nil {
			return err
		}
		created = tag.RowsAffected() == 1
		if _, err := tx.Exec(ctx, `
INSERT INTO demo_player_goals (player_id, challenge_id)
SELECT $1, id FROM demo_challenges
ON CONFLICT (player_id, challenge_id) DO NOTHING`, id); err != nil {
			return err
		}
		st, err = loadPlayer(ctx, tx, id)
		return err
	})
	return st, created, err
}

func (d *pgDB) setActiveChallenge(ctx context.Context, id, challengeID string) error {
	c, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tag, err := c.Exec(ctx, `UPDATE demo_players SET active_challenge_id = $2 WHERE id = $1`, id, challengeID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errPlayerNotFound
	}
	return nil
}

func (d *pgDB) claimReward(ctx context.Context, id, challengeID string) (time.Time, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer c.Release()
	var at time.Time
	err = c.QueryRow(ctx, `
UPDATE demo_player_goals SET claimed_at = now()
WHERE player_id = $1 AND challenge_id = $2 AND claimed_at IS NULL
RETURNING claimed_at`, id, challengeID).Scan(&at)
	if err == nil {
		return at, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, err
	}
	var exists bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM demo_player_goals WHERE player_id = $1 AND challenge_id = $2)`,
		id, challengeID).Scan(&exists); err != nil {
		return time.Time{}, err
	}
	if exists {
		return time.Time{}, errAlreadyClaimed
	}
	return time.Time{}, errPlayerNotFound
}

func (d *pgDB) insertStat(ctx context.Context, e statEvent) (uint64, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	var id int64
	err = c.QueryRow(ctx, `INSERT INTO demo_stat_events (player_id, stat, value, occurred_at) VALUES ($1, $2, $3, $4) RETURNING id`,
		e.PlayerID, e.Stat, e.Value, e.At).Scan(&id)
	return uint64(id), err
}

func (d *pgDB) insertLogin(ctx context.Context, e loginEvent) (uint64, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	var id int64
	err = c.QueryRow(ctx, `INSERT INTO demo_login_events (player_id, platform, session_id, occurred_at) VALUES ($1, $2, $3, $4) RETURNING id`,
		e.PlayerID, e.Platform, e.SessionID, e.At).Scan(&id)
	return uint64(id), err
}

func (d *pgDB) poolStat() poolStat {
	s := d.pool.Stat()
	return poolStat{
		MaxConns:          int64(s.MaxConns()),
		TotalConns:        int64(s.TotalConns()),
		IdleConns:         int64(s.IdleConns()),
		AcquiredConns:     int64(s.AcquiredConns()),
		ConstructingConns: int64(s.ConstructingConns()),
		Acquires:          s.AcquireCount(),
		WaitedAcquires:    s.EmptyAcquireCount(),
		AcquireTimeouts:   d.acquireTimeouts.Load(),
		AcquireErrors:     d.acquireErrors.Load(),
		NewConns:          s.NewConnsCount(),
		AcquireWait:       s.AcquireDuration(),
		ConnSetup:         time.Duration(d.connSetupNanos.Load()),
	}
}

func (d *pgDB) close() { d.pool.Close() }
