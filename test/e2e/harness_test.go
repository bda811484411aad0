// Package e2e runs the real k6 binary built from this repository against
// local servers on 127.0.0.1.
package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/test/testbin"
)

// repoRoot is the module root.
func repoRoot(tb testing.TB) string { tb.Helper(); return testbin.RepoRoot(tb) }

// k6Binary returns the k6 binary under test ($K6_BIN, or built once).
func k6Binary(tb testing.TB) string { tb.Helper(); return testbin.K6(tb) }

// k6Result is what one k6 run left behind.
type k6Result struct {
	ExitCode int
	Stdout   string
	Stderr   string
	Dir      string
}

// runK6 writes script into a temp dir and runs `k6 run` on it, bounded in time.
func runK6(tb testing.TB, script string, env map[string]string, args ...string) k6Result {
	tb.Helper()
	res, err := startK6(tb, script, env, args...)()
	require.NoError(tb, err)
	return res
}

// startK6 writes script into a temp dir (on the test's goroutine) and
// returns the run: a function that runs `k6 run` on it, bounded in time, and
// fails nothing, so that another goroutine can call it (a FailNow there
// would end that goroutine before it reported, and leave the test waiting
// on it until the package's timeout).
func startK6(tb testing.TB, script string, env map[string]string, args ...string) func() (k6Result, error) {
	tb.Helper()
	dir := tb.TempDir()
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "script.js"), []byte(script), 0o600))
	all := map[string]string{"REPO": repoRoot(tb)}
	for k, v := range env {
		all[k] = v
	}
	bin := k6Binary(tb)
	return func() (k6Result, error) {
		res, err := runK6Script(bin, dir, "script.js", all, append([]string{"--quiet"}, args...)...)
		res.Dir = dir
		return res, err
	}
}

// jsonPoint is one line of k6's --out json of type Point.
type jsonPoint struct {
	Type   string `json:"type"`
	Metric string `json:"metric"`
	Data   struct {
		Value float64           `json:"value"`
		Tags  map[string]string `json:"tags"`
	} `json:"data"`
}

// readPoints calls fn for every Point of a --out json file (gzip when .gz).
func readPoints(tb testing.TB, path string, fn func(p *jsonPoint)) {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer func() { _ = f.Close() }()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		require.NoError(tb, err)
		r = gz
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"type":"Point"`)) {
			continue
		}
		var p jsonPoint
		require.NoError(tb, json.Unmarshal(line, &p))
		fn(&p)
	}
	require.NoError(tb, sc.Err())
}

// scheduleServer answers every request after a latency that depends only on
// the request's arrival order: the known boundaries the detector must find.
type scheduleServer struct {
	*httptest.Server
	n atomic.Int64
}

// latencyFunc maps the 0-based request number to the service latency.
type latencyFunc func(i int64, rng *rand.Rand) time.Duration

func newScheduleServer(tb testing.TB, latency latencyFunc) *scheduleServer {
	tb.Helper()
	s := &scheduleServer{}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := s.n.Add(1) - 1
		mu.Lock()
		d := latency(i, rng)
		mu.Unlock()
		time.Sleep(d) // the simulated service time itself, not a synchronisation
		w.Header().Set("Content-Type", "application/json")
		// the request's place in the schedule, so that a script can tell
		// which requests the server served in its cold phase
		w.Header().Set("X-Request-Index", strconv.FormatInt(i, 10))
		_, _ = fmt.Fprintf(w, `{"i":%d}`, i)
	}))
	tb.Cleanup(s.Close)
	return s
}

// coldWarmSteady: a slow cold start (exponential decay from ~80 ms), then a
// warm-up ramp down to the steady level, then steady with small jitter.
func coldWarmSteady(coldN, warmN int64, steady time.Duration) latencyFunc {
	return func(i int64, rng *rand.Rand) time.Duration {
		jitter := time.Duration(rng.Float64() * float64(steady) * 0.1)
		switch {
		case i < coldN:
			return steady + time.Duration(80*math.Exp(-float64(i)/float64(coldN)*3)*float64(time.Millisecond))
		case i < coldN+warmN:
			frac := float64(i-coldN) / float64(warmN)
			return time.Duration(float64(steady)*(2.5-1.5*frac)) + jitter
		default:
			return steady + jitter
		}
	}
}

// settlesThenSlows: steady with small jitter for settleN requests or
// settleFor after the first one, whichever comes first, then a level that
// grows by growth x steady per second from then on (time-based, so that
// the slowdown is as steep however fast the load loop runs; the time cap
// keeps it inside the run on a machine slow enough that settleN requests
// take most of it).
func settlesThenSlows(settleN int64, settleFor, steady time.Duration, growth float64) latencyFunc {
	var first, since time.Time // guarded by the server's mutex
	return func(i int64, rng *rand.Rand) time.Duration {
		jitter := time.Duration(rng.Float64() * float64(steady) * 0.1)
		if first.IsZero() {
			first = time.Now()
		}
		if since.IsZero() && (i >= settleN || time.Since(first) >= settleFor) {
			since = time.Now()
		}
		if since.IsZero() {
			return steady + jitter
		}
		return steady + jitter + time.Duration(growth*time.Since(since).Seconds()*float64(steady))
	}
}

// neverSettles: latency keeps growing for the whole run.
func neverSettles(step time.Duration) latencyFunc {
	return func(i int64, rng *rand.Rand) time.Duration {
		return time.Millisecond + time.Duration(i)*step + time.Duration(rng.Float64()*float64(100*time.Microsecond))
	}
}
