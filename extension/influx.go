package extension

// The xk6-regime-influxdb output: writes what the detectors find (regime
// transitions, every closed detector window, the final per-regime summary)
// to InfluxDB, next to the raw k6 samples that k6's built-in `--out influxdb`
// writes. It is not a sample writer: it observes the run state.
//
//	k6 run --tag testid=run42 \
//	  --out influxdb=http://127.0.0.1:8086/k6 \
//	  --out xk6-regime-influxdb=http://127.0.0.1:8086/k6 script.js
//
// Settings, lowest precedence first (like k6's own outputs): defaults, the
// JSON config (`collectors["xk6-regime-influxdb"]` of a --config file),
// K6_REGIME_INFLUXDB_* environment variables, then the --out argument, a URL
// whose path is the v1 database and whose query holds any other setting:
//
//	http://[user:password@]host:port[/database][?key=value&...]
//
// InfluxDB slow or down never slows or fails the test: observer callbacks
// only put an event into a bounded channel (dropped and counted when full);
// one goroutine turns events into points for influxdb-client-go's
// non-blocking write API, which batches and retries with backoff; Stop waits
// at most stopTimeout for the last writes. Points not acknowledged by
// InfluxDB are counted and reported at the end of the run. Tokens and
// passwords never reach a log line or an error message.

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	influxlog "github.com/influxdata/influxdb-client-go/v2/log"
	"github.com/sirupsen/logrus"
	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
	"go.k6.io/k6/v2/metrics"
	"go.k6.io/k6/v2/output"
)

// influxOutputName is the name to pass to --out.
const influxOutputName = "xk6-regime-influxdb"

// Measurements the output writes.
const (
	measTransition = "regime_transition"
	measWindow     = "regime_window"
	measSummary    = "regime_summary"
	measOutput     = "regime_output"
)

// influxEvent is one observer call, copied.
type influxEvent struct {
	scenario, endpoint string
	isWindow           bool
	tr                 TransitionRecord
	w                  detector.Window
}

// influxOutput is the output. Its observer methods are safe for concurrent
// use and never block; everything else runs on its own goroutines.
type influxOutput struct {
	cfg    influxConfig
	logger logrus.FieldLogger
	rs     *RunState
	now    func() time.Time

	events   chan influxEvent
	stopping atomic.Bool
	quit     chan struct{}
	pumpDone chan struct{}
	errsDone chan struct{}

	client   influxdb2.Client
	writeAPI api.WriteAPI

	droppedFull atomic.Int64 // events lost because the buffer was full
	droppedLate atomic.Int64 // events after Stop began
	handed      atomic.Int64 // points given to the client
	delivered   atomic.Int64 // points InfluxDB acknowledged (2xx)
	writeErrors atomic.Int64
	lastErr     atomic.Pointer[string]
	stopOnce    sync.Once
}

var (
	_ output.Output = (*influxOutput)(nil)
	_ Observer      = (*influxOutput)(nil)
)

func newInfluxOutput(p output.Params, rs *RunState) (*influxOutput, error) {
	cfg, err := parseInfluxConfig(p.JSONConfig, p.Environment, p.ConfigArgument, p.ScriptOptions.RunTags, time.Now())
	if err != nil {
		return nil, err
	}
	logger := p.Logger
	if logger == nil {
		logger = logrus.StandardLogger()
	}
	return &influxOutput{
		cfg:    cfg,
		logger: logger.WithField("output", influxOutputName),
		rs:     rs,
		now:    time.Now,
		events: make(chan influxEvent, cfg.BufferLimit),
		quit:   make(chan struct{}),
	}, nil
}

func (o *influxOutput) Description() string {
	return fmt.Sprintf("%s (%s, testid %s)", influxOutputName, o.cfg.target(), o.cfg.TestID)
}

// Start connects the client (no request is made until the first batch) and
// registers the output as an observer of the run.
func (o *influxOutput) Start() error {
	libLog.set(o.logger, &o.cfg)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.DialContext = (&net.Dialer{Timeout: o.cfg.Timeout}).DialContext
	opts := influxdb2.DefaultOptions().
		SetApplicationName("xk6-regime").
		SetHTTPClient(&http.Client{
			Timeout:   o.cfg.Timeout,
			Transport: &ackCountingTransport{next: transport, acked: &o.delivered},
		}).
		SetBatchSize(uint(o.cfg.BatchSize)).
		SetFlushInterval(uint(o.cfg.FlushInterval/time.Millisecond)).
		SetMaxRetries(uint(o.cfg.MaxRetries)).
		SetRetryInterval(uint(o.cfg.RetryInterval/time.Millisecond)).
		SetMaxRetryInterval(uint(o.cfg.MaxRetryInterval/time.Millisecond)).
		SetExponentialBase(2).
		SetRetryBufferLimit(uint(o.cfg.BufferLimit)).
		SetLogLevel(influxlog.WarningLevel).
		AddDefaultTag("testid", o.cfg.TestID)
	o.client = influxdb2.NewClientWithOptions(o.cfg.URL, o.cfg.Token, opts)
	o.writeAPI = o.client.WriteAPI(o.cfg.Org, o.cfg.Bucket)
	errs := o.writeAPI.Errors() // before any write, so that errors are reported
	o.errsDone = make(chan struct{})
	go o.drainErrors(errs)
	o.pumpDone = make(chan struct{})
	go o.pump()
	o.rs.AddObserver(o)
	msg := fmt.Sprintf("%s: writing regime transitions, detector windows and summaries to %s, testid %q",
		influxOutputName, o.cfg.target(), o.cfg.TestID)
	if o.cfg.TestIDAuto {
		msg += fmt.Sprintf(" (generated: run k6 with --tag testid=%s so that k6's own samples carry it too)", o.cfg.TestID)
	}
	o.logger.Debug(msg)
	if o.cfg.TestIDAuto {
		o.logger.Info(msg)
	}
	return nil
}

// AddMetricSamples does nothing: this output observes the detectors, and
// raw samples go through k6's own outputs.
func (o *influxOutput) AddMetricSamples([]metrics.SampleContainer) {}

// Transition and Window are the observer callbacks: copy, never block.
func (o *influxOutput) Transition(scenario string, t TransitionRecord) {
	o.push(influxEvent{scenario: scenario, endpoint: t.Endpoint, tr: t})
}

func (o *influxOutput) Window(scenario, endpoint string, w detector.Window) {
	o.push(influxEvent{scenario: scenario, endpoint: endpoint, isWindow: true, w: w})
}

// Iteration is not written: raw samples go through k6's own influxdb output.
func (o *influxOutput) Iteration(string, int64, string, time.Time, float64) {}

func (o *influxOutput) push(e influxEvent) {
	if o.stopping.Load() {
		o.droppedLate.Add(1)
		return
	}
	select {
	case o.events <- e:
	default:
		o.droppedFull.Add(1)
	}
}

// pump turns events into points until Stop, then drains what is left.
func (o *influxOutput) pump() {
	defer close(o.pumpDone)
	for {
		select {
		case e := <-o.events:
			o.write(e.point())
		case <-o.quit:
			for {
				select {
				case e := <-o.events:
					o.write(e.point())
				default:
					return
				}
			}
		}
	}
}

func (o *influxOutput) write(p *write.Point) {
	o.handed.Add(1)
	o.writeAPI.WritePoint(p)
}

// drainErrors logs write errors (redacted): the 1st, 10th, 100th... so a
// dead server does not flood the log; all are counted.
func (o *influxOutput) drainErrors(errs <-chan error) {
	defer close(o.errsDone)
	for err := range errs {
		n := o.writeErrors.Add(1)
		msg := o.cfg.redact(err.Error())
		o.lastErr.Store(&msg)
		if isPowerOf10(n) {
			o.logger.Warnf("%s: write to %s failed (%d so far; the test goes on, points are retried, then dropped): %s",
				influxOutputName, o.cfg.URL, n, msg)
		}
	}
}

func isPowerOf10(n int64) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// Stop unregisters the observer, writes what is buffered and the final
// summary, and reports what was dropped. It waits at most stopTimeout and
// never returns an error: a missing InfluxDB must not fail the test.
func (o *influxOutput) Stop() error {
	o.stopOnce.Do(o.stop)
	return nil
}

func (o *influxOutput) stop() {
	if o.client == nil { // never started
		return
	}
	o.rs.RemoveObserver(o)
	o.stopping.Store(true)
	close(o.quit)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-o.pumpDone
		o.writeAPI.Flush()
		for _, p := range o.summaryPoints(o.now()) {
			o.write(p)
		}
		o.client.Close() // flushes, then closes the errors channel
		<-o.errsDone
	}()
	timedOut := false
	timer := time.NewTimer(o.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		timedOut = true
	}
	o.report(timedOut)
	libLog.clear(o.logger)
}

// dropped counts the events and points that did not reach InfluxDB so far.
func (o *influxOutput) dropped() (total, buffer, unacked int64) {
	buffer = o.droppedFull.Load() + o.droppedLate.Load()
	unacked = max(o.handed.Load()-o.delivered.Load(), 0)
	return buffer + unacked, buffer, unacked
}

func (o *influxOutput) report(timedOut bool) {
	total, buffer, unacked := o.dropped()
	written := o.delivered.Load()
	if total == 0 {
		o.logger.Debugf("%s: wrote %d points to %s (testid %q)", influxOutputName, written, o.cfg.target(), o.cfg.TestID)
		return
	}
	msg := fmt.Sprintf("%s: dropped %d points (buffer full or late: %d, not acknowledged by InfluxDB: %d); wrote %d to %s",
		influxOutputName, total, buffer, unacked, written, o.cfg.target())
	if timedOut {
		msg += fmt.Sprintf("; gave up waiting after stopTimeout %s", o.cfg.StopTimeout)
	}
	if n := o.writeErrors.Load(); n > 0 {
		msg += fmt.Sprintf("; %d write errors, last: %s", n, *o.lastErr.Load())
	}
	o.logger.Warn(o.cfg.redact(msg))
}

// point converts an event into its InfluxDB point.
func (e *influxEvent) point() *write.Point {
	tags := map[string]string{"scenario": e.scenario}
	if e.endpoint != "" {
		tags["endpoint"] = e.endpoint
	}
	if e.isWindow {
		w := &e.w
		tags["regime"] = w.Regime.String()
		fields := map[string]any{
			"seq": int64(w.Seq), "n": int64(w.N), "stable": w.Stable,
			"first_index": w.First.Index, "last_index": w.Last.Index,
		}
		addFloat(fields, "median", w.Median)
		addFloat(fields, "tail", w.Tail)
		addFloat(fields, "tail_quantile", w.TailQuantile)
		addFloat(fields, "drift", w.Drift)
		return write.NewPoint(measWindow, tags, fields, time.Unix(0, w.Last.Time))
	}
	t := &e.tr
	tags["from"], tags["to"], tags["kind"] = t.From.String(), t.To.String(), t.Kind
	elapsed := ms(t.Elapsed)
	label := e.scenario
	if e.endpoint != "" {
		label += " " + e.endpoint
	}
	fields := map[string]any{
		"index": t.At.Index, "boundary": t.Boundary.Index,
		"elapsed_ms":          elapsed,
		"boundary_elapsed_ms": elapsed - ms(time.Duration(t.At.Time-t.Boundary.Time)),
		"text": fmt.Sprintf("%s: %s → %s (%s) at iteration %d, boundary %d",
			label, t.From, t.To, t.Kind, t.At.Index, t.Boundary.Index),
	}
	return write.NewPoint(measTransition, tags, fields, time.Unix(0, t.At.Time))
}

// addFloat sets a float field unless it is NaN or infinite (line protocol
// has no representation for them).
func addFloat(fields map[string]any, k string, v float64) {
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		fields[k] = v
	}
}

// addFloatPtr sets a float field when v is set (and finite).
func addFloatPtr(fields map[string]any, k string, v *float64) {
	if v != nil {
		addFloat(fields, k, *v)
	}
}

// summaryPoints turns the run state's final summary into one
// regime_summary point per scenario x regime (scenario-level values repeated
// on each, so that one query finds them) and one regime_output point with
// this output's own drop counts.
func (o *influxOutput) summaryPoints(at time.Time) []*write.Point {
	total, buffer, unacked := o.dropped()
	var points []*write.Point
	rep := o.rs.Report()
	for _, name := range slices.Sorted(maps.Keys(rep.Scenarios)) {
		sc := rep.Scenarios[name]
		common := map[string]any{
			"dropped_points": total, "iterations": sc.Iterations, "untagged": sc.Untagged,
			"relapses": sc.Relapses, "steady": sc.Steady, "class": sc.Class,
			"cold_start_iterations": sc.ColdStart.Iterations,
		}
		addFloat(common, "cold_start_ms", sc.ColdStart.DurationMs)
		addFloatPtr(common, "ttss_ms", sc.TTSSMs)
		addFloatPtr(common, "declared_after_ms", sc.DeclaredAfterMs)
		addFloatPtr(common, "cold_start_excess_ms", sc.ColdStart.ExcessMs)
		for _, p := range []struct {
			name string
			at   *results.Point
		}{{"cold_end", sc.ColdEnd}, {"steady_start", sc.SteadyStart}, {"declared_at", sc.DeclaredAt}} {
			if p.at != nil {
				common[p.name+"_index"] = p.at.Index
				addFloat(common, p.name+"_elapsed_ms", p.at.ElapsedMs)
			}
		}
		for _, r := range regimeNames {
			d := sc.Regimes[r]
			fields := maps.Clone(common)
			fields["count"] = d.Count
			addFloat(fields, "sum_ms", d.SumMs)
			for _, f := range []struct {
				name string
				v    *float64
			}{{"min", d.Min}, {"mean", d.Mean}, {"p50", d.P50}, {"p90", d.P90}, {"p95", d.P95}, {"p99", d.P99}, {"p99_9", d.P999}, {"max", d.Max}} {
				addFloatPtr(fields, f.name, f.v)
			}
			points = append(points, write.NewPoint(measSummary,
				map[string]string{"scenario": name, "regime": r}, fields, at))
		}
	}
	points = append(points, write.NewPoint(measOutput, map[string]string{"output": influxOutputName}, map[string]any{
		"points_dropped":        total,
		"points_dropped_buffer": buffer,
		"points_unacknowledged": unacked,
		"points_written":        o.delivered.Load(),
		"write_errors":          o.writeErrors.Load(),
	}, at))
	return points
}

// ackCountingTransport counts the lines of every write InfluxDB
// acknowledged (2xx): points handed to the client minus those are the
// points lost, whichever of the client's paths (retry buffer full, retries
// exhausted, expired) lost them.
type ackCountingTransport struct {
	next  http.RoundTripper
	acked *atomic.Int64
}

func (t *ackCountingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Method != http.MethodPost {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	lines := int64(bytes.Count(body, []byte{'\n'}))
	if len(body) > 0 && body[len(body)-1] != '\n' {
		lines++
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode/100 == 2 {
		t.acked.Add(lines)
	}
	return resp, err
}

// libLog routes influxdb-client-go's process-wide logger (a package variable
// of that library) to the active output's k6 logger at debug level,
// redacted; the output reports failures itself.
var libLog = &influxLibLogger{}

type influxLibLogger struct {
	mu     sync.Mutex
	logger logrus.FieldLogger
	cfg    *influxConfig
}

var installLibLog sync.Once

func (l *influxLibLogger) set(logger logrus.FieldLogger, cfg *influxConfig) {
	installLibLog.Do(func() { influxlog.Log = l })
	l.mu.Lock()
	l.logger, l.cfg = logger, cfg
	l.mu.Unlock()
}

func (l *influxLibLogger) clear(logger logrus.FieldLogger) {
	l.mu.Lock()
	if l.logger == logger {
		l.logger, l.cfg = nil, nil
	}
	l.mu.Unlock()
}

func (l *influxLibLogger) log(msg string) {
	l.mu.Lock()
	logger, cfg := l.logger, l.cfg
	l.mu.Unlock()
	if logger != nil {
		logger.Debug("influxdb client: " + cfg.redact(strings.TrimSpace(msg)))
	}
}

func (l *influxLibLogger) Debugf(f string, v ...any) { l.log(fmt.Sprintf(f, v...)) }
func (l *influxLibLogger) Debug(msg string)          { l.log(msg) }
func (l *influxLibLogger) Infof(f string, v ...any)  { l.log(fmt.Sprintf(f, v...)) }
func (l *influxLibLogger) Info(msg string)           { l.log(msg) }
func (l *influxLibLogger) Warnf(f string, v ...any)  { l.log(fmt.Sprintf(f, v...)) }
func (l *influxLibLogger) Warn(msg string)           { l.log(msg) }
func (l *influxLibLogger) Errorf(f string, v ...any) { l.log(fmt.Sprintf(f, v...)) }
func (l *influxLibLogger) Error(msg string)          { l.log(msg) }
func (l *influxLibLogger) SetLogLevel(uint)          {}
func (l *influxLibLogger) SetPrefix(string)          {}

// LogLevel is below debug, so the library never formats whole batches.
func (l *influxLibLogger) LogLevel() uint { return influxlog.WarningLevel }
