package simpool

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// instant is a Sleep that returns at once and counts setups (d == setup).
type instant struct {
	setup  time.Duration
	setups atomic.Int64
}

func (s *instant) sleep(ctx context.Context, d time.Duration) error {
	if d == s.setup {
		s.setups.Add(1)
	}
	return ctx.Err()
}

// gate is a Sleep that blocks each call until the test lets it through.
type gate struct {
	started chan time.Duration
	release chan struct{}
}

func newGate() *gate {
	return &gate{started: make(chan time.Duration, 64), release: make(chan struct{})}
}

func (g *gate) sleep(ctx context.Context, d time.Duration) error {
	g.started <- d
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newPool(tb testing.TB, cfg Config) *Pool {
	tb.Helper()
	p, err := New(cfg)
	require.NoError(tb, err)
	tb.Cleanup(p.Close)
	return p
}

func waitFor(tb testing.TB, p *Pool, cond func(Stat) bool) {
	tb.Helper()
	require.Eventually(tb, func() bool { return cond(p.Stat()) }, 5*time.Second, time.Millisecond)
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{MaxConns: 0, ConnSetup: -1, AcquireTimeout: -1})
	require.Error(t, err)
	for _, want := range []string{"MaxConns = 0", "ConnSetup = -1ns", "AcquireTimeout = -1ns"} {
		require.ErrorContains(t, err, want)
	}
}

func TestStartsEmptyGrowsToMaxAndPaysSetupOncePerConn(t *testing.T) {
	t.Parallel()
	s := &instant{setup: 50 * time.Millisecond}
	p := newPool(t, Config{MaxConns: 4, ConnSetup: s.setup, AcquireTimeout: 20 * time.Millisecond, Sleep: s.sleep})

	require.Equal(t, Stat{MaxConns: 4}, p.Stat(), "a new pool holds no connection")

	// Sequential use needs one connection only.
	for range 50 {
		c, err := p.Acquire(t.Context())
		require.NoError(t, err)
		require.Equal(t, uint64(1), c.ID())
		c.Release()
	}
	require.Equal(t, int64(1), s.setups.Load())

	// Holding connections makes the pool grow, up to MaxConns.
	var held []*Conn
	for range 4 {
		c, err := p.Acquire(t.Context())
		require.NoError(t, err)
		held = append(held, c)
	}
	st := p.Stat()
	require.Equal(t, 4, st.TotalConns)
	require.Equal(t, 4, st.AcquiredConns)
	require.Equal(t, int64(4), st.NewConns)
	require.Equal(t, int64(4), s.setups.Load())

	_, err := p.Acquire(t.Context())
	require.ErrorIs(t, err, ErrTimeout)
	require.Equal(t, 4, p.Stat().TotalConns, "no connection beyond MaxConns")

	for _, c := range held {
		c.Release()
	}
	st = p.Stat()
	require.Equal(t, 4, st.IdleConns)
	require.Equal(t, 0, st.AcquiredConns)
	require.Equal(t, int64(54), st.Acquires)
	require.Equal(t, int64(1), st.AcquireTimeouts)
}

func TestFirstAcquireWaitsForSetup(t *testing.T) {
	t.Parallel()
	g := newGate()
	p := newPool(t, Config{MaxConns: 2, ConnSetup: 40 * time.Millisecond, AcquireTimeout: 5 * time.Second, Sleep: g.sleep})

	got := make(chan *Conn)
	go func() {
		c, err := p.Acquire(context.Background())
		if err != nil {
			close(got)
			return
		}
		got <- c
	}()
	require.Equal(t, 40*time.Millisecond, <-g.started, "the first acquire opens a connection")
	st := p.Stat()
	require.Equal(t, 1, st.ConstructingConns)
	require.Equal(t, 0, st.TotalConns)
	waitFor(t, p, func(s Stat) bool { return s.Waiting == 1 })

	g.release <- struct{}{}
	c := <-got
	require.NotNil(t, c)
	st = p.Stat()
	require.Equal(t, 1, st.TotalConns)
	require.Equal(t, 0, st.ConstructingConns)
	require.Equal(t, int64(1), st.WaitedAcquires)
	require.Equal(t, int64(1), st.NewConns)
	require.Positive(t, st.ConnSetup)
	c.Release()

	// Warm: the idle connection is reused, nothing is opened or waited for.
	c, err := p.Acquire(t.Context())
	require.NoError(t, err)
	c.Release()
	select {
	case d := <-g.started:
		t.Fatalf("unexpected sleep of %s on a warm pool", d)
	default:
	}
	require.Equal(t, int64(1), p.Stat().WaitedAcquires)
}

func TestReleasedConnGoesToFirstWaiter(t *testing.T) {
	t.Parallel()
	s := &instant{}
	p := newPool(t, Config{MaxConns: 1, AcquireTimeout: 5 * time.Second, Sleep: s.sleep})
	held, err := p.Acquire(t.Context())
	require.NoError(t, err)

	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		waitFor(t, p, func(s Stat) bool { return s.Waiting == i })
		wg.Go(func() {
			c, err := p.Acquire(context.Background())
			if err != nil {
				order <- -1
				return
			}
			order <- i
			c.Release()
		})
	}
	waitFor(t, p, func(s Stat) bool { return s.Waiting == 3 })
	held.Release()
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	require.Equal(t, []int{0, 1, 2}, got)
	require.Equal(t, int64(1), p.Stat().NewConns)
}

func TestOverloadFailsFastWithBoundedLatency(t *testing.T) {
	t.Parallel()
	const timeout = 30 * time.Millisecond
	s := &instant{}
	p := newPool(t, Config{MaxConns: 2, AcquireTimeout: timeout, Sleep: s.sleep})
	a, err := p.Acquire(t.Context())
	require.NoError(t, err)
	b, err := p.Acquire(t.Context())
	require.NoError(t, err)

	const n = 20
	durs := make(chan time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			start := time.Now()
			_, err := p.Acquire(context.Background())
			durs <- time.Since(start)
			errs <- err
		})
	}
	wg.Wait()
	close(durs)
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, ErrTimeout)
	}
	for d := range durs {
		require.GreaterOrEqual(t, d, timeout)
		require.Less(t, d, timeout+time.Second, "an overloaded acquire must give up promptly")
	}
	st := p.Stat()
	require.Equal(t, int64(n), st.AcquireTimeouts)
	require.Equal(t, 0, st.Waiting)
	a.Release()
	b.Release()
	require.Equal(t, 2, p.Stat().IdleConns, "timed-out waiters leak no connection")
}

func TestCanceledAcquireAndClose(t *testing.T) {
	t.Parallel()
	g := newGate()
	p, err := New(Config{MaxConns: 1, ConnSetup: time.Second, Sleep: g.sleep})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := p.Acquire(ctx)
		done <- err
	}()
	<-g.started
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, int64(1), p.Stat().CanceledAcquires)
	require.Equal(t, 1, p.Stat().ConstructingConns, "the setup goes on for the next acquirer")

	go func() {
		_, err := p.Acquire(context.Background())
		done <- err
	}()
	waitFor(t, p, func(s Stat) bool { return s.Waiting == 1 })
	p.Close()
	require.ErrorIs(t, <-done, ErrClosed)
	_, err = p.Acquire(t.Context())
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, Stat{MaxConns: 1, CanceledAcquires: 1}, p.Stat())
}

func TestConcurrentChurn(t *testing.T) {
	t.Parallel()
	s := &instant{setup: time.Millisecond}
	p := newPool(t, Config{MaxConns: 4, ConnSetup: s.setup, AcquireTimeout: 5 * time.Second, Sleep: s.sleep})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for range 50 {
				c, err := p.Acquire(context.Background())
				if err != nil {
					failed.Add(1)
					continue
				}
				_ = c.Hold(context.Background(), 0)
				c.Release()
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load())
	st := p.Stat()
	require.Equal(t, int64(800), st.Acquires)
	require.LessOrEqual(t, st.TotalConns, 4)
	require.Equal(t, st.TotalConns, st.IdleConns)
	require.Equal(t, int64(st.TotalConns), s.setups.Load())
}
