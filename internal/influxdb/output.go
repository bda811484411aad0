// Package influxdb is the xk6-regime-influxdb output: it writes what the
// detectors find (regime transitions, every closed detector window, the
// final per-regime summary) to InfluxDB, next to the raw k6 samples that
// k6's built-in `--out influxdb` writes. It is not a sample writer: it observes the run (engine.RunState,
// through the Run interface).
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
//
// The files: config.go (the settings), output.go (the buffer, the pump,
// Start and Stop, the drop counts, the client's logger), points.go (events
// and the run's report as InfluxDB points).
package influxdb

import (
	"bytes"
	"errors"
	"fmt"
	influxhttp "github.com/influxdata/influxdb-client-go/v2/api/http"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	influxlog "github.com/influxdata/influxdb-client-go/v2/log"
	"github.com/sirupsen/logrus"
	"go.k6.io/k6/v2/metrics"
	"go.k6.io/k6/v2/output"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/engine"
)

// Name is the output's name, to pass to --out.
const Name = "xk6-regime-influxdb"

// Output is the output. Its observer methods are safe for concurrent use and
// never block; everything else runs on its own goroutines.
type Output struct {
	cfg    config
	logger logrus.FieldLogger
	run    Run
	now    func() time.Time

	events   chan event
	stopping atomic.Bool
	quit     chan struct{}
	pumpDone chan struct{}
	errsDone chan struct{}

	client   influxdb2.Client
	writeAPI api.WriteAPI

	droppedFull atomic.Int64 // events lost because the buffer was full
	droppedLate atomic.Int64 // events after Stop began
	givenUp     atomic.Bool  // Stop stopped waiting (stopTimeout)
	handed      atomic.Int64 // points given to the client
	delivered   atomic.Int64 // points InfluxDB acknowledged (2xx)
	writeErrors atomic.Int64
	lastErr     atomic.Pointer[string]
	stopOnce    sync.Once
}

// Run is what the output needs of the run it observes.
type Run interface {
	AddObserver(engine.Observer)
	RemoveObserver(engine.Observer)
	// SummaryReport is the run's report as it stands, with how the run
	// ended once it has; the output reads it when it writes the summary
	// points.
	SummaryReport() *engine.RunReport
	// AtExit runs f at k6's Exit event, after handleSummary wrote the
	// results folders; false when it will not (engine.RunState.AtExit).
	AtExit(f func()) bool
}

var (
	_ output.Output   = (*Output)(nil)
	_ engine.Observer = (*Output)(nil)
	_ Run             = (*engine.RunState)(nil)
)

// New builds the output from k6's params (its settings: config.go), to
// observe run once started. A configuration error lists every problem.
func New(p output.Params, run Run) (output.Output, error) {
	cfg, err := parseConfig(p.JSONConfig, p.Environment, p.ConfigArgument, p.ScriptOptions.RunTags, time.Now())
	if err != nil {
		return nil, err
	}
	logger := p.Logger
	if logger == nil {
		logger = logrus.StandardLogger()
	}
	return &Output{
		cfg:    cfg,
		logger: logger.WithField("output", Name),
		run:    run,
		now:    time.Now,
		events: make(chan event, cfg.BufferLimit),
		quit:   make(chan struct{}),
	}, nil
}

// Description is what k6 prints of the output at the start of the run.
func (o *Output) Description() string {
	return fmt.Sprintf("%s (%s, testid %s)", Name, o.cfg.target(), o.cfg.TestID)
}

// Start connects the client (no request is made until the first batch) and
// registers the output as an observer of the run.
func (o *Output) Start() error {
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
	o.run.AddObserver(o)
	msg := fmt.Sprintf("%s: writing regime transitions, detector windows and summaries to %s, testid %q",
		Name, o.cfg.target(), o.cfg.TestID)
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
func (o *Output) AddMetricSamples([]metrics.SampleContainer) {}

// Transition and Window are the observer callbacks (engine.Observer):
// they copy the event into the buffer, or count it dropped; they never block.
func (o *Output) Transition(scenario string, t engine.TransitionRecord) {
	o.push(event{scenario: scenario, endpoint: t.Endpoint, tr: t})
}

// Window: see Transition.
func (o *Output) Window(scenario, endpoint string, w detector.Window) {
	o.push(event{scenario: scenario, endpoint: endpoint, isWindow: true, w: w})
}

// Iteration is not written: raw samples go through k6's own influxdb output.
func (o *Output) Iteration(string, int64, string, time.Time, float64) {}

func (o *Output) push(e event) {
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
func (o *Output) pump() {
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

func (o *Output) write(p *write.Point) {
	o.handed.Add(1)
	o.writeAPI.WritePoint(p)
}

// drainErrors logs write errors (redacted): the 1st, 10th, 100th... so a
// dead server does not flood the log; all are counted.
func (o *Output) drainErrors(errs <-chan error) {
	defer close(o.errsDone)
	for err := range errs {
		n := o.writeErrors.Add(1)
		msg := o.cfg.redact(err.Error())
		var he *influxhttp.Error
		if errors.As(err, &he) && (he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden) {
			msg += fmt.Sprintf(" (InfluxDB refused the credentials: check token, or username and password for InfluxDB 1.8, "+
				"and that they may write to %s)", o.cfg.Bucket)
		}
		o.lastErr.Store(&msg)
		if isPowerOf10(n) {
			o.logger.Warnf("%s: write to %s failed (%d so far; the test goes on, points are retried, then dropped): %s",
				Name, o.cfg.URL, n, msg)
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
func (o *Output) Stop() error {
	o.stopOnce.Do(o.stop)
	return nil
}

func (o *Output) stop() {
	if o.client == nil { // never started
		return
	}
	o.run.RemoveObserver(o)
	o.stopping.Store(true)
	close(o.quit)
	// k6 stops its outputs before handleSummary: waiting here for a slow
	// or hanging InfluxDB (up to stopTimeout) delayed the results folder,
	// and a SIGTERM followed by a SIGKILL 10 s later (docker stop) lost
	// it. The wait, and the summary points, are left to k6's Exit event,
	// after handleSummary: the folder is written first, and the summary
	// points count every iteration (k6's metrics engine may take the last
	// samples after this output's Stop). The points already queued are
	// written meanwhile.
	if o.run.AtExit(o.finish) {
		return
	}
	o.finish()
}

// finish writes the run's summary points and waits, up to stopTimeout,
// for the client to flush; then it reports what was lost.
func (o *Output) finish() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-o.pumpDone
		o.writeAPI.Flush()
		// after stopTimeout nobody waits: the summary, whose counts the
		// report has already given, is not written late
		if !o.givenUp.Load() {
			rep := o.run.SummaryReport()
			if len(rep.Scenarios) == 0 {
				o.logger.Warnf("%s: the run has no scenario the regime extension saw (does the script import k6/x/regime?): "+
					"no transitions, windows or regime summaries to write", Name)
			}
			for _, p := range SummaryPoints(rep, o.Counts(), o.now()) {
				if o.givenUp.Load() {
					break
				}
				o.write(p)
			}
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
		o.givenUp.Store(true)
	}
	o.report(timedOut)
	libLog.clear(o.logger)
}

// Counts are the output's own figures so far: the events and points that
// did not reach InfluxDB, and the points that did.
type Counts struct {
	Dropped        int64 // DroppedBuffer + Unacknowledged
	DroppedBuffer  int64 // events lost because the buffer was full or Stop had begun
	Unacknowledged int64 // points handed to the client and not acknowledged by InfluxDB
	Handed         int64 // points handed to the client
	Written        int64 // points InfluxDB acknowledged (2xx)
	WriteErrors    int64 // write errors the client reported
}

// Counts returns the output's counts so far; safe for concurrent use.
func (o *Output) Counts() Counts {
	c := Counts{
		DroppedBuffer: o.droppedFull.Load() + o.droppedLate.Load(),
		Handed:        o.handed.Load(),
		Written:       o.delivered.Load(),
		WriteErrors:   o.writeErrors.Load(),
	}
	c.Unacknowledged = max(c.Handed-c.Written, 0)
	c.Dropped = c.DroppedBuffer + c.Unacknowledged
	return c
}

func (o *Output) report(timedOut bool) {
	c := o.Counts()
	total, buffer, unacked, written := c.Dropped, c.DroppedBuffer, c.Unacknowledged, c.Written
	if total == 0 && timedOut {
		o.logger.Warnf("%s: gave up waiting after stopTimeout %s: the last writes to %s and the run's summary points may be missing (%d points written)",
			Name, o.cfg.StopTimeout, o.cfg.target(), written)
		return
	}
	if total == 0 {
		o.logger.Debugf("%s: wrote %d points to %s (testid %q)", Name, written, o.cfg.target(), o.cfg.TestID)
		return
	}
	msg := fmt.Sprintf("%s: dropped %d points (buffer full or late: %d, not acknowledged by InfluxDB: %d); wrote %d to %s",
		Name, total, buffer, unacked, written, o.cfg.target())
	if timedOut {
		msg += fmt.Sprintf("; gave up waiting after stopTimeout %s: the last writes and the run's summary points may be missing", o.cfg.StopTimeout)
	}
	if n := c.WriteErrors; n > 0 {
		// the error goroutine counts an error before it stores it
		last := "(not yet recorded)"
		if p := o.lastErr.Load(); p != nil {
			last = *p
		}
		msg += fmt.Sprintf("; %d write errors, last: %s", n, last)
	}
	o.logger.Warn(o.cfg.redact(msg))
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
var libLog = &libLogger{}

type libLogger struct {
	mu     sync.Mutex
	logger logrus.FieldLogger
	cfg    *config
}

var installLibLog sync.Once

func (l *libLogger) set(logger logrus.FieldLogger, cfg *config) {
	installLibLog.Do(func() { influxlog.Log = l })
	l.mu.Lock()
	l.logger, l.cfg = logger, cfg
	l.mu.Unlock()
}

func (l *libLogger) clear(logger logrus.FieldLogger) {
	l.mu.Lock()
	if l.logger == logger {
		l.logger, l.cfg = nil, nil
	}
	l.mu.Unlock()
}

func (l *libLogger) log(msg string) {
	l.mu.Lock()
	logger, cfg := l.logger, l.cfg
	l.mu.Unlock()
	if logger != nil {
		logger.Debug("influxdb client: " + cfg.redact(strings.TrimSpace(msg)))
	}
}

func (l *libLogger) Debugf(f string, v ...any) { l.log(fmt.Sprintf(f, v...)) }
func (l *libLogger) Debug(msg string)          { l.log(msg) }
func (l *libLogger) Infof(f string, v ...any)  { l.log(fmt.Sprintf(f, v...)) }
func (l *libLogger) Info(msg string)           { l.log(msg) }
func (l *libLogger) Warnf(f string, v ...any)  { l.log(fmt.Sprintf(f, v...)) }
func (l *libLogger) Warn(msg string)           { l.log(msg) }
func (l *libLogger) Errorf(f string, v ...any) { l.log(fmt.Sprintf(f, v...)) }
func (l *libLogger) Error(msg string)          { l.log(msg) }
func (l *libLogger) SetLogLevel(uint)          {}
func (l *libLogger) SetPrefix(string)          {}

// LogLevel is below debug, so the library never formats whole batches.
func (l *libLogger) LogLevel() uint { return influxlog.WarningLevel }
