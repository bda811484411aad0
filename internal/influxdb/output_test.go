package influxdb

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.k6.io/k6/v2/output"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/engine"
)

func TestIsPowerOf10(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]bool{1: true, 2: false, 10: true, 11: false, 100: true, 110: false, 1000: true, 0: false} {
		require.Equal(t, want, isPowerOf10(n), n)
	}
}

// fakeRun is a run as the output sees it (Run): it registers observers
// and calls them as engine.RunState does, and its report is empty.
type fakeRun struct {
	mu        sync.Mutex
	observers []engine.Observer
}

func (r *fakeRun) AddObserver(o engine.Observer) {
	r.mu.Lock()
	r.observers = append(r.observers, o)
	r.mu.Unlock()
}

func (r *fakeRun) RemoveObserver(o engine.Observer) {
	r.mu.Lock()
	r.observers = slices.DeleteFunc(slices.Clone(r.observers), func(x engine.Observer) bool { return x == o })
	r.mu.Unlock()
}

// AtExit: this fake has no k6 Exit event, so Stop finishes at once.
func (r *fakeRun) AtExit(func()) bool { return false }

func (r *fakeRun) SummaryReport() *engine.RunReport {
	return &engine.RunReport{Scenarios: map[string]*engine.ScenarioReport{}}
}

// window calls every registered observer as a closed detector window does.
func (r *fakeRun) window(scenario, endpoint string, w detector.Window) {
	r.mu.Lock()
	obs := r.observers
	r.mu.Unlock()
	for _, o := range obs {
		o.Window(scenario, endpoint, w)
	}
}

// newTestOutput is the output with settings from arg and env, logging to a
// test hook at debug level.
func newTestOutput(t *testing.T, run Run, arg string, env map[string]string) (*Output, *logtest.Hook) {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	o, err := New(output.Params{ConfigArgument: arg, Environment: env, Logger: logger}, run)
	require.NoError(t, err)
	return o.(*Output), hook
}

// TestInfluxOutputNeverBlocks: with InfluxDB hanging, observer calls
// return at once, what does not fit the buffer is dropped and counted, Stop
// returns after stopTimeout and reports the drops.
func TestInfluxOutputNeverBlocks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		<-release // a server that never answers while the test runs
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	run := &fakeRun{}
	o, hook := newTestOutput(t, run, srv.URL+"/k6?bufferLimit=100&batchSize=10&flushInterval=10ms&timeout=30s&stopTimeout=300ms", nil)
	require.NoError(t, o.Start())

	const n = 100_000
	w := detector.Window{N: 100, Median: 5, Tail: 7, Drift: math.NaN(), Regime: detector.Warmup}
	begin := time.Now()
	for i := range n {
		w.Seq, w.Last.Time = i, int64(i)
		run.window("load", "", w)
	}
	perCall := time.Since(begin) / n
	require.Less(t, perCall, 50*time.Microsecond, "observer calls must not wait for InfluxDB")

	stopBegin := time.Now()
	require.NoError(t, o.Stop())
	require.Less(t, time.Since(stopBegin), 3*time.Second)

	c := o.Counts()
	total, buffer := c.Dropped, c.DroppedBuffer
	require.Greater(t, buffer, int64(n-200), "the bounded buffer must drop")
	require.GreaterOrEqual(t, total, buffer)
	var warned bool
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "dropped") {
			warned = true
			require.Contains(t, e.Message, fmt.Sprintf("dropped %d points", total))
			require.Contains(t, e.Message, "gave up waiting after stopTimeout 300ms")
		}
	}
	require.True(t, warned, "no drop report in %v", hook.AllEntries())
	// a late callback is counted, not written (and Stop unregistered the
	// output: the run calls it no more)
	run.window("load", "", w)
	o.Window("load", "", w)
	require.Equal(t, int64(1), o.droppedLate.Load())
}
