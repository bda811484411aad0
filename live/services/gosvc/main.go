// Command gosvc is the live harness's Go HTTP service (compiled ahead of
// time: no JIT), in one of eight shapes:
//
//   - flat: a fixed amount of work per request (SHA-256 of 2 KiB, four
//     times): no warm-up, but a latency of a few tenths of a millisecond,
//     which the load generator and the machine dominate;
//   - io: a wait of -io-wait (a downstream call) plus the flat work: the
//     flat control whose latency is the service's own;
//   - stall: io, and every -stall-every (2 s, on average: the gaps are
//     drawn from 1 to 3 s) the world stops for -stall-for (20 ms), as a
//     garbage collector's stop-the-world pauses do: the requests that
//     arrive meanwhile wait for its end. A settled
//     service whose window p99 is several times higher in the windows with
//     a pause than in those without;
//   - slowpath: io, but -slow-share (1%) of the requests, drawn at random
//     (from a seed of the process's start time: every run draws its own),
//     wait -slow-wait (20 ms) instead: a settled service with a slow path
//     about as common as a 500-request window's p99, so that its p99 flips
//     between the two paths from window to window by chance alone;
//   - slowdown: flat until -settle after its first request, then every
//     request appends -grow entries to a table that every request scans:
//     the work per request grows for good;
//   - drift: the flat work plus a wait (a downstream call) of -drift-base
//     at its first request that grows by -drift per second: it never
//     settles;
//   - step: a -step-from wait (40 ms) until -step-at after its first
//     request, then -step-to (5 ms): a plateau that is not the steady state;
//   - cache: the flat work plus -cache-keys lookups per request of keys
//     drawn uniformly from -cache-size; a key not yet cached costs
//     -miss-wait (a read from slow storage) and is cached for good: the
//     median settles once most lookups hit, the tail only when nearly all
//     do (at 500 requests/s, 4 keys of 10,000: the median within about
//     10 s, the p99 within about 30 s).
//
// It listens on -addr (127.0.0.1:0 picks a free port) and prints
// "listening on HOST:PORT" once it accepts connections. GET /health answers
// 200 without work, GET /first the Unix ns of the first request of work (0
// before it); every other GET path does the work. In any mode, -fail-after
// answers 503 and -exit-after exits, that long after the first request: the
// harness's tests of a service that fails during a run.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type service struct {
	mode   string
	settle time.Duration
	grow   int
	drift  float64
	base   time.Duration
	ioWait time.Duration
	stepAt time.Duration
	from   time.Duration
	to     time.Duration

	// failAfter, exitAfter (0: never): the harness's tests of a service
	// that answers errors, or dies, during a run
	failAfter, exitAfter time.Duration

	payload [2048]byte
	first   atomic.Int64 // Unix ns of the first request; 0 before it

	mu    sync.Mutex
	table []uint64
	seed  uint64

	cacheKeys int
	cacheSize int
	missWait  time.Duration
	cache     map[uint64]struct{}

	// stall: the world stops for stallFor every stallEvery (requests wait
	// on world while the stopper holds it)
	world      sync.RWMutex
	stallEvery time.Duration
	stallFor   time.Duration
	// slowpath: slowShare of the requests wait slowWait instead of ioWait
	slowShare float64
	slowWait  time.Duration
	slowSeed  uint64 // from the process's start time: every run draws its own
}

// stopTheWorld holds the world for stallFor every stallEvery on average
// until done closes, as a garbage collector's stop-the-world pauses do: the
// gaps between pauses are drawn uniformly from half to one and a half
// times stallEvery, from a seed of the process's start time, so that
// repeated runs do not share the pauses' times (what repeats at the start
// of every run is taken for a warm-up by the harness's consensus).
func (s *service) stopTheWorld(done <-chan struct{}) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for {
		gap := time.Duration((0.5 + r.Float64()) * float64(s.stallEvery))
		select {
		case <-done:
			return
		case <-time.After(gap):
			s.world.Lock()
			time.Sleep(s.stallFor)
			s.world.Unlock()
		}
	}
}

// slow draws whether this request takes the slow path.
func (s *service) slow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slowSeed ^= s.slowSeed << 13
	s.slowSeed ^= s.slowSeed >> 7
	s.slowSeed ^= s.slowSeed << 17
	return float64(s.slowSeed>>11)/(1<<53) < s.slowShare
}

// lookups draws cacheKeys keys and returns how many were not cached yet
// (they are now).
func (s *service) lookups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	misses := 0
	for range s.cacheKeys {
		s.seed ^= s.seed << 13
		s.seed ^= s.seed >> 7
		s.seed ^= s.seed << 17
		k := s.seed % uint64(s.cacheSize)
		if _, ok := s.cache[k]; !ok {
			s.cache[k] = struct{}{}
			misses++
		}
	}
	return misses
}

func (s *service) since() time.Duration {
	now := time.Now().UnixNano()
	s.first.CompareAndSwap(0, now)
	return time.Duration(now - s.first.Load())
}

// work is the flat part: SHA-256 of the payload, chained four times.
func (s *service) work() string {
	sum := sha256.Sum256(s.payload[:])
	for range 3 {
		sum = sha256.Sum256(append(sum[:], s.payload[:256]...))
	}
	return hex.EncodeToString(sum[:8])
}

// scan grows the table by grow entries and folds all of it: O(table) work.
func (s *service) scan() uint64 {
	s.mu.Lock()
	for range s.grow {
		s.seed ^= s.seed << 13
		s.seed ^= s.seed >> 7
		s.seed ^= s.seed << 17
		s.table = append(s.table, s.seed)
	}
	t := s.table
	s.mu.Unlock()
	var acc uint64
	for _, v := range t {
		acc = acc*31 + v>>3
	}
	return acc
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/health":
		_, _ = w.Write([]byte("ok\n"))
		return
	case "/first":
		// when the first request of work came (Unix ns; 0: none yet)
		_, _ = fmt.Fprintf(w, "%d\n", s.first.Load())
		return
	}
	el := s.since()
	if s.exitAfter > 0 && el >= s.exitAfter {
		fmt.Fprintf(os.Stderr, "gosvc: exiting %s after the first request (-exit-after)\n", s.exitAfter)
		os.Exit(3)
	}
	if s.failAfter > 0 && el >= s.failAfter {
		http.Error(w, "failing on purpose (-fail-after)", http.StatusServiceUnavailable)
		return
	}
	var extra uint64
	switch s.mode {
	case "slowdown":
		if el >= s.settle {
			extra = s.scan()
		}
	case "io":
		time.Sleep(s.ioWait)
	case "stall":
		s.world.RLock()
		s.world.RUnlock()
		time.Sleep(s.ioWait)
	case "slowpath":
		if s.slow() {
			time.Sleep(s.slowWait)
		} else {
			time.Sleep(s.ioWait)
		}
	case "drift":
		// a downstream whose latency grows by drift per second, for good
		time.Sleep(time.Duration(float64(s.base) * math.Exp(s.drift*el.Seconds())))
	case "step":
		if el < s.stepAt {
			time.Sleep(s.from)
		} else {
			time.Sleep(s.to)
		}
	case "cache":
		if m := s.lookups(); m > 0 {
			time.Sleep(time.Duration(m) * s.missWait)
		}
	}
	h := s.work()
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"hash":%q,"x":%d}`+"\n", h, extra&0xff)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0: a free port)")
	mode := flag.String("mode", "flat", "flat, io, stall, slowpath, slowdown, drift, step or cache")
	ioWait := flag.Duration("io-wait", 2*time.Millisecond, "io, stall, slowpath: the wait per request")
	stallEvery := flag.Duration("stall-every", 2*time.Second, "stall: how often the world stops, on average (gaps drawn from half to 1.5 times it)")
	stallFor := flag.Duration("stall-for", 20*time.Millisecond, "stall: how long the world stops")
	slowShare := flag.Float64("slow-share", 0.01, "slowpath: the share of requests that take the slow path (0-1)")
	slowWait := flag.Duration("slow-wait", 20*time.Millisecond, "slowpath: the wait of a request on the slow path")
	settle := flag.Duration("settle", 25*time.Second, "slowdown: flat this long after the first request")
	grow := flag.Int("grow", 32, "slowdown: table entries added per request after -settle")
	drift := flag.Float64("drift", 0.02, "drift: relative growth of the wait per second")
	base := flag.Duration("drift-base", 4*time.Millisecond, "drift: the wait at the first request")
	stepAt := flag.Duration("step-at", 8*time.Second, "step: -step-from this long after the first request, then -step-to")
	from := flag.Duration("step-from", 40*time.Millisecond, "step: the wait before -step-at")
	to := flag.Duration("step-to", 5*time.Millisecond, "step: the wait after -step-at")
	cacheKeys := flag.Int("cache-keys", 4, "cache: lookups per request")
	cacheSize := flag.Int("cache-size", 10000, "cache: the keys lookups are drawn from")
	missWait := flag.Duration("miss-wait", time.Millisecond, "cache: the wait per lookup of a key not cached yet")
	failAfter := flag.Duration("fail-after", 0, "answer 503 from this long after the first request on (0: never; a test of the harness)")
	exitAfter := flag.Duration("exit-after", 0, "exit with status 3 this long after the first request (0: never; a test of the harness)")
	flag.Parse()
	switch *mode {
	case "flat", "io", "stall", "slowpath", "slowdown", "drift", "step", "cache":
	default:
		fmt.Fprintf(os.Stderr, "gosvc: -mode must be flat, io, stall, slowpath, slowdown, drift, step or cache, got %q\n", *mode)
		os.Exit(2)
	}
	if *grow < 1 || *drift <= 0 || *base <= 0 || *settle < 0 || *stepAt < 0 || *ioWait <= 0 || *from < 0 || *to < 0 ||
		*cacheKeys < 1 || *cacheSize < 1 || *missWait <= 0 || *stallEvery <= 0 || *stallFor <= 0 || *stallFor >= *stallEvery ||
		!(*slowShare >= 0 && *slowShare <= 1) || *slowWait <= 0 || *failAfter < 0 || *exitAfter < 0 {
		fmt.Fprintln(os.Stderr, "gosvc: -grow, -cache-keys and -cache-size must be >= 1, -drift, -drift-base, -io-wait, -miss-wait, "+
			"-stall-every, -stall-for and -slow-wait > 0, -stall-for < -stall-every, -slow-share in 0..1, "+
			"-settle, -step-at, -step-from, -step-to, -fail-after and -exit-after >= 0")
		os.Exit(2)
	}
	s := &service{mode: *mode, settle: *settle, grow: *grow, drift: *drift, base: *base, ioWait: *ioWait, stepAt: *stepAt, from: *from, to: *to,
		seed: 88172645463325252, cacheKeys: *cacheKeys, cacheSize: *cacheSize, missWait: *missWait, cache: map[uint64]struct{}{},
		stallEvery: *stallEvery, stallFor: *stallFor, slowShare: *slowShare, slowWait: *slowWait,
		slowSeed: uint64(time.Now().UnixNano()) | 1, failAfter: *failAfter, exitAfter: *exitAfter}
	for i := range s.payload {
		s.payload[i] = byte(i * 7)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gosvc: listen on %s: %v\n", *addr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening on %s\n", ln.Addr())
	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGINT, syscall.SIGTERM)
	stop := make(chan struct{})
	defer close(stop)
	if *mode == "stall" {
		go s.stopTheWorld(stop)
	}
	go func() {
		<-done
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "gosvc: %v\n", err)
		os.Exit(1)
	}
}
