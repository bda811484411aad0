// Package simpool simulates the client side of a connection pool to a remote
// database, so the demo service has a realistic cold start with nothing to
// install.
//
// A Pool starts empty and opens connections on demand, up to MaxConns. Every
// new connection pays ConnSetup once (TCP + TLS + authentication round trips
// to a remote server); the wait is a timer, not CPU work. An acquirer that
// finds no idle connection queues (first come, first served) for the next
// connection to become free, whether a released one or a newly opened one,
// and gives up after AcquireTimeout with ErrTimeout. A connection whose
// acquirer gave up is still opened and joins the pool, as with pgxpool.
//
// The package knows nothing of the data: it only hands out connections and
// simulates how long work on them takes (Conn.Hold).
package simpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrTimeout is returned by Acquire when no connection became free within
// the acquire timeout.
var ErrTimeout = errors.New("simpool: timed out waiting for a database connection")

// ErrClosed is returned by Acquire once the pool is closed.
var ErrClosed = errors.New("simpool: pool closed")

// Config sets the size and timings of a Pool.
type Config struct {
	// MaxConns is the most connections the pool opens (>= 1).
	MaxConns int
	// ConnSetup is the time to open one connection (>= 0).
	ConnSetup time.Duration
	// AcquireTimeout bounds how long Acquire waits for a connection
	// (> 0; 0 means wait until ctx is done).
	AcquireTimeout time.Duration

	// Sleep waits for d or until ctx is done; nil means a real timer. Tests
	// inject a controllable one to decide when setups and queries finish.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Stat is a snapshot of a pool's state and cumulative counters, with the
// same meanings as pgxpool.Stat.
type Stat struct {
	MaxConns          int
	TotalConns        int // open connections, idle or acquired
	IdleConns         int
	AcquiredConns     int
	ConstructingConns int // being opened
	Waiting           int // acquirers queued right now

	Acquires         int64         // successful acquires
	WaitedAcquires   int64         // successful acquires that found no idle connection
	AcquireWait      time.Duration // total time successful acquires spent in Acquire
	AcquireTimeouts  int64         // acquires that gave up after AcquireTimeout
	CanceledAcquires int64         // acquires whose context ended first
	NewConns         int64         // connections opened
	ConnSetup        time.Duration // total time spent opening connections
}

// Pool is a simulated connection pool. All methods are safe for concurrent
// use; one mutex guards the state, which always changes together.
type Pool struct {
	cfg   Config
	sleep func(context.Context, time.Duration) error
	now   func() time.Time

	closeCtx context.Context
	closeFn  context.CancelFunc
	wg       sync.WaitGroup // connection setups in flight

	mu           sync.Mutex
	closed       bool
	idle         []*Conn // LIFO: the most recently used connection is reused first
	waiters      []chan *Conn
	total        int
	acquired     int
	constructing int
	nextID       uint64
	stat         Stat // cumulative counters only
}

// Conn is a connection acquired from a Pool. It must be released exactly once.
type Conn struct {
	pool *Pool
	id   uint64
}

// New returns an empty pool, or an error naming every invalid setting.
func New(cfg Config) (*Pool, error) {
	var errs []error
	if cfg.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("MaxConns = %d: must be at least 1", cfg.MaxConns))
	}
	if cfg.ConnSetup < 0 {
		errs = append(errs, fmt.Errorf("ConnSetup = %s: must not be negative", cfg.ConnSetup))
	}
	if cfg.AcquireTimeout < 0 {
		errs = append(errs, fmt.Errorf("AcquireTimeout = %s: must not be negative", cfg.AcquireTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, sleep: cfg.Sleep, now: cfg.Now}
	if p.sleep == nil {
		p.sleep = Sleep
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.closeCtx, p.closeFn = context.WithCancel(context.Background())
	return p, nil
}

// Sleep waits for d on a timer, or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Acquire returns an idle connection, or waits for one: if the pool is not
// full it starts opening a new connection, and the first connection to come
// free (new or released) goes to the longest-waiting acquirer. It returns
// ErrTimeout after AcquireTimeout, ctx.Err() if ctx ends first, ErrClosed
// after Close.
func (p *Pool) Acquire(ctx context.Context) (*Conn, error) {
	start := p.now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.acquired++
		p.stat.Acquires++
		p.stat.AcquireWait += p.now().Sub(start)
		p.mu.Unlock()
		return c, nil
	}
	if p.total+p.constructing < p.cfg.MaxConns {
		p.constructing++
		p.wg.Add(1)
		go p.open()
	}
	w := make(chan *Conn, 1) // buffered: hand-off happens under p.mu and never blocks
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()

	var timeout <-chan time.Time
	if p.cfg.AcquireTimeout > 0 {
		t := time.NewTimer(p.cfg.AcquireTimeout)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case c := <-w:
		return p.waited(c, start)
	case <-timeout:
		err = ErrTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}

	p.mu.Lock()
	if !p.removeWaiterLocked(w) {
		// A connection was handed to us just as we gave up: take it.
		p.mu.Unlock()
		return p.waited(<-w, start)
	}
	if errors.Is(err, ErrTimeout) {
		p.stat.AcquireTimeouts++
	} else {
		p.stat.CanceledAcquires++
	}
	p.mu.Unlock()
	return nil, err
}

// waited finishes an acquire that queued; c is nil when the pool closed.
func (p *Pool) waited(c *Conn, start time.Time) (*Conn, error) {
	if c == nil {
		return nil, ErrClosed
	}
	d := p.now().Sub(start)
	p.mu.Lock()
	p.stat.Acquires++
	p.stat.WaitedAcquires++
	p.stat.AcquireWait += d
	p.mu.Unlock()
	return c, nil
}

func (p *Pool) removeWaiterLocked(w chan *Conn) bool {
	for i, x := range p.waiters {
		if x == w {
			copy(p.waiters[i:], p.waiters[i+1:])
			p.waiters[len(p.waiters)-1] = nil
			p.waiters = p.waiters[:len(p.waiters)-1]
			return true
		}
	}
	return false
}

// open simulates opening one connection, then hands it over.
func (p *Pool) open() {
	defer p.wg.Done()
	start := p.now()
	err := p.sleep(p.closeCtx, p.cfg.ConnSetup)
	d := p.now().Sub(start)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.constructing--
	if err != nil || p.closed {
		return
	}
	p.nextID++
	p.total++
	p.stat.NewConns++
	p.stat.ConnSetup += d
	p.acquired++ // handOffLocked gives it back if nobody waits
	p.handOffLocked(&Conn{pool: p, id: p.nextID})
}

// handOffLocked passes an acquired connection to the first waiter, or makes
// it idle.
func (p *Pool) handOffLocked(c *Conn) {
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
		w <- c
		return
	}
	p.acquired--
	p.idle = append(p.idle, c)
}

// Release returns c to the pool.
func (c *Conn) Release() {
	p := c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.acquired--
		p.total--
		return
	}
	p.handOffLocked(c)
}

// Hold keeps the connection busy for d, as a query would: it returns when d
// has passed or ctx is done.
func (c *Conn) Hold(ctx context.Context, d time.Duration) error {
	return c.pool.sleep(ctx, d)
}

// ID numbers connections in the order they were opened, from 1.
func (c *Conn) ID() uint64 { return c.id }

// Stat returns a snapshot of the pool.
func (p *Pool) Stat() Stat {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stat
	s.MaxConns = p.cfg.MaxConns
	s.TotalConns = p.total
	s.IdleConns = len(p.idle)
	s.AcquiredConns = p.acquired
	s.ConstructingConns = p.constructing
	s.Waiting = len(p.waiters)
	return s
}

// Close wakes every waiter with ErrClosed, drops idle connections, stops
// connection setups in flight and waits for them. Connections still acquired
// are dropped when released.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.total -= len(p.idle)
	p.idle = nil
	for _, w := range p.waiters {
		w <- nil
	}
	p.waiters = nil
	p.mu.Unlock()
	p.closeFn()
	p.wg.Wait()
}
