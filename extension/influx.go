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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
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

const influxEnvPrefix = "K6_REGIME_INFLUXDB_"

// influxOption describes one setting: its name in JSON and in the --out
// query, its environment variable and its default.
type influxOption struct {
	key    string
	env    string
	def    string
	secret bool
}

var influxOptions = []influxOption{
	{key: "url", env: "URL", def: "http://127.0.0.1:8086"},
	{key: "org", env: "ORG"},
	{key: "bucket", env: "BUCKET"},
	{key: "token", env: "TOKEN", secret: true},
	{key: "database", env: "DATABASE"},
	{key: "retentionPolicy", env: "RETENTION_POLICY"},
	{key: "username", env: "USERNAME"},
	{key: "password", env: "PASSWORD", secret: true},
	{key: "testid", env: "TESTID"},
	{key: "flushInterval", env: "FLUSH_INTERVAL", def: "1s"},
	{key: "batchSize", env: "BATCH_SIZE", def: "1000"},
	{key: "bufferLimit", env: "BUFFER_LIMIT", def: "10000"},
	{key: "timeout", env: "TIMEOUT", def: "5s"},
	{key: "maxRetries", env: "MAX_RETRIES", def: "3"},
	{key: "retryInterval", env: "RETRY_INTERVAL", def: "1s"},
	{key: "maxRetryInterval", env: "MAX_RETRY_INTERVAL", def: "10s"},
	{key: "stopTimeout", env: "STOP_TIMEOUT", def: "10s"},
}

func influxOptionByKey(key string) (influxOption, bool) {
	for _, o := range influxOptions {
		if o.key == key {
			return o, true
		}
	}
	return influxOption{}, false
}

func influxKeys() string {
	keys := make([]string, len(influxOptions))
	for i, o := range influxOptions {
		keys[i] = o.key
	}
	return strings.Join(keys, ", ")
}

// rawSetting is one setting's value and where it came from (for errors).
type rawSetting struct {
	value, source string
}

// influxConfig is the validated configuration of the output.
type influxConfig struct {
	URL        string // scheme://host[:port][/prefix], no credentials
	Org        string
	Bucket     string // v2 bucket, or "database[/retention policy]" for 1.8
	V1         bool   // InfluxDB 1.8 compatibility mode (database set)
	Token      string // v2 token, or "user:password" for 1.8
	TestID     string
	TestIDAuto bool // TestID was generated, not given

	FlushInterval    time.Duration
	BatchSize        int
	BufferLimit      int
	Timeout          time.Duration
	MaxRetries       int
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	StopTimeout      time.Duration

	secrets []string // values to redact from every message
}

// parseInfluxConfig layers defaults, the JSON config, the environment and
// the --out argument, then validates the result, reporting every problem.
// runTags are the run's --tag values (testid defaults to tags.testid).
func parseInfluxConfig(jsonConf json.RawMessage, env map[string]string, arg string, runTags map[string]string, now time.Time) (influxConfig, error) {
	set := map[string]rawSetting{}
	for _, o := range influxOptions {
		if o.def != "" {
			set[o.key] = rawSetting{o.def, "default"}
		}
	}
	var errs []error
	errs = append(errs, layerJSON(set, jsonConf)...)
	errs = append(errs, layerEnv(set, env)...)
	errs = append(errs, layerArg(set, arg)...)
	if len(errs) > 0 {
		return influxConfig{}, configError(errs)
	}
	if _, ok := set["testid"]; !ok {
		if id := runTags["testid"]; id != "" {
			set["testid"] = rawSetting{id, "--tag testid"}
		}
	}
	cfg, errs := validateInfluxConfig(set, now)
	if len(errs) > 0 {
		return influxConfig{}, configError(errs)
	}
	return cfg, nil
}

func configError(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = "  - " + e.Error()
	}
	return fmt.Errorf("%s: invalid configuration:\n%s", influxOutputName, strings.Join(msgs, "\n"))
}

// layerJSON applies the JSON config: an object of the same keys as the
// --out query; numbers and booleans are accepted for numeric settings.
func layerJSON(set map[string]rawSetting, raw json.RawMessage) []error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return []error{fmt.Errorf("JSON config (collectors.%s) must be an object: %w", influxOutputName, err)}
	}
	var errs []error
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		src := fmt.Sprintf("JSON config key %q", k)
		if _, ok := influxOptionByKey(k); !ok {
			errs = append(errs, fmt.Errorf("%s: unknown setting; valid keys: %s", src, influxKeys()))
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(m[k]))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src, err))
			continue
		}
		if k == "url" {
			// checked as the environment's URL is (found by
			// FuzzInfluxConfig: {"url": "@"} was accepted as is)
			switch x, ok := v.(string); {
			case v == nil:
				delete(set, k)
			case !ok:
				errs = append(errs, fmt.Errorf("%s: must be a URL string such as \"http://127.0.0.1:8086\"", src))
			default:
				errs = append(errs, layerURL(set, x, src, false)...)
			}
			continue
		}
		switch x := v.(type) {
		case string:
			set[k] = rawSetting{x, src}
		case json.Number:
			set[k] = rawSetting{x.String(), src}
		case bool:
			set[k] = rawSetting{strconv.FormatBool(x), src}
		case nil:
			delete(set, k)
		default:
			errs = append(errs, fmt.Errorf("%s: must be a string or a number", src))
		}
	}
	return errs
}

// layerEnv applies K6_REGIME_INFLUXDB_* variables; an unknown one is an
// error (a typo must not be ignored silently).
func layerEnv(set map[string]rawSetting, env map[string]string) []error {
	var errs []error
	names := make([]string, 0)
	for name := range env {
		if strings.HasPrefix(name, influxEnvPrefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		suffix := strings.TrimPrefix(name, influxEnvPrefix)
		i := slices.IndexFunc(influxOptions, func(o influxOption) bool { return o.env == suffix })
		if i < 0 {
			valid := make([]string, len(influxOptions))
			for j, o := range influxOptions {
				valid[j] = influxEnvPrefix + o.env
			}
			errs = append(errs, fmt.Errorf("unknown environment variable %s; valid ones: %s", name, strings.Join(valid, ", ")))
			continue
		}
		o := influxOptions[i]
		if o.key == "url" {
			errs = append(errs, layerURL(set, env[name], name, false)...)
			continue
		}
		set[o.key] = rawSetting{env[name], name}
	}
	return errs
}

// layerArg applies the --out argument: a URL whose path is the database
// and whose query parameters are settings.
func layerArg(set map[string]rawSetting, arg string) []error {
	if arg == "" {
		return nil
	}
	return layerURL(set, arg, "--out argument", true)
}

var quotedPart = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// layerURL splits a server URL into url, username/password and, when
// withQuery, the database (path) and further settings (query). Parse errors
// never quote the URL: it may hold a password.
func layerURL(set map[string]rawSetting, raw, source string, withQuery bool) []error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		// url.Parse quotes the part it stumbled on ("invalid port %q"),
		// which may be a password: the quoted part is left out
		msg := quotedPart.ReplaceAllString(err.Error(), "(value not shown)")
		return []error{fmt.Errorf("%s: not a URL like http://127.0.0.1:8086/k6 (%s)", source, msg)}
	}
	var errs []error
	if u.Scheme != "http" && u.Scheme != "https" {
		errs = append(errs, fmt.Errorf("%s: URL scheme must be http or https, got %q", source, u.Scheme))
	}
	if u.Host == "" {
		errs = append(errs, fmt.Errorf("%s: URL has no host (want http://host:port)", source))
	}
	if u.User != nil {
		set["username"] = rawSetting{u.User.Username(), source + " (user info)"}
		if p, ok := u.User.Password(); ok {
			set["password"] = rawSetting{p, source + " (user info)"}
		}
	}
	path := strings.Trim(u.Path, "/")
	switch {
	case withQuery:
		if path != "" {
			set["database"] = rawSetting{path, source + " (path)"}
		}
		q := u.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			src := fmt.Sprintf("%s query parameter %q", source, k)
			if _, ok := influxOptionByKey(k); !ok || k == "url" {
				errs = append(errs, fmt.Errorf("%s: unknown setting; valid ones: %s", src, strings.TrimPrefix(influxKeys(), "url, ")))
				continue
			}
			set[k] = rawSetting{q.Get(k), src}
		}
		set["url"] = rawSetting{u.Scheme + "://" + u.Host, source}
	default:
		if u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("%s: URL must not have a query; set options with their own variables", source))
		}
		// a path is a reverse-proxy prefix here, kept as is
		set["url"] = rawSetting{u.Scheme + "://" + u.Host + strings.TrimRight(u.Path, "/"), source}
	}
	return errs
}

// validateInfluxConfig checks every setting and derives the write target.
func validateInfluxConfig(set map[string]rawSetting, now time.Time) (influxConfig, []error) {
	var errs []error
	get := func(k string) string { return set[k].value }
	bad := func(k, want string) {
		o, _ := influxOptionByKey(k)
		v := strconv.Quote(set[k].value)
		if o.secret {
			v = "[redacted]"
		}
		errs = append(errs, fmt.Errorf("%s=%s (from %s): %s", k, v, set[k].source, want))
	}
	cfg := influxConfig{URL: get("url"), TestID: get("testid")}
	if cfg.URL == "" {
		bad("url", "must be an http:// or https:// URL such as http://127.0.0.1:8086")
	}

	intIn := func(k string, lo, hi int) int {
		n, err := strconv.Atoi(strings.TrimSpace(get(k)))
		if err != nil || n < lo || n > hi {
			bad(k, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
		}
		return n
	}
	durIn := func(k string, lo, hi time.Duration) time.Duration {
		s := strings.TrimSpace(get(k))
		d, err := time.ParseDuration(s)
		if err != nil {
			// a bare number is milliseconds, as in k6's JSON durations
			ms, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil {
				bad(k, fmt.Sprintf("must be a duration from %s to %s such as \"1s\" or \"500ms\"", lo, hi))
				return 0
			}
			d = time.Duration(ms * float64(time.Millisecond))
		}
		if d < lo || d > hi {
			bad(k, fmt.Sprintf("must be a duration from %s to %s", lo, hi))
		}
		return d
	}
	cfg.FlushInterval = durIn("flushInterval", 10*time.Millisecond, time.Hour)
	cfg.BatchSize = intIn("batchSize", 1, 100_000)
	cfg.BufferLimit = intIn("bufferLimit", 1, 10_000_000)
	cfg.Timeout = durIn("timeout", 100*time.Millisecond, 10*time.Minute)
	cfg.MaxRetries = intIn("maxRetries", 0, 100)
	cfg.RetryInterval = durIn("retryInterval", time.Millisecond, 10*time.Minute)
	cfg.MaxRetryInterval = durIn("maxRetryInterval", time.Millisecond, time.Hour)
	cfg.StopTimeout = durIn("stopTimeout", 0, time.Hour)
	if cfg.BufferLimit > 0 && cfg.BatchSize > cfg.BufferLimit {
		bad("batchSize", fmt.Sprintf("must not exceed bufferLimit (%d)", cfg.BufferLimit))
	}
	if cfg.MaxRetryInterval > 0 && cfg.RetryInterval > cfg.MaxRetryInterval {
		bad("retryInterval", fmt.Sprintf("must not exceed maxRetryInterval (%s)", cfg.MaxRetryInterval))
	}

	db, rp, bucket := get("database"), get("retentionPolicy"), get("bucket")
	user, pass, token := get("username"), get("password"), get("token")
	switch {
	case bucket != "": // InfluxDB 2.x
		if db != "" {
			bad("database", "set either bucket and org (InfluxDB 2.x) or database (InfluxDB 1.8), not both")
		}
		if rp != "" {
			bad("retentionPolicy", "is for InfluxDB 1.8 (database); with bucket, leave it empty")
		}
		if user != "" || pass != "" {
			bad("username", "username/password are for InfluxDB 1.8 (database); InfluxDB 2.x needs token")
		}
		if get("org") == "" {
			errs = append(errs, fmt.Errorf("org is required with bucket=%q (InfluxDB 2.x); set %sORG or ?org=", bucket, influxEnvPrefix))
		}
		cfg.Org, cfg.Bucket, cfg.Token = get("org"), bucket, token
	default: // InfluxDB 1.8 through its /api/v2/write compatibility endpoint
		if db == "" {
			db = "k6"
		}
		if strings.Contains(db, "/") {
			bad("database", "must not contain '/' (set the retention policy with retentionPolicy)")
		}
		if strings.Contains(rp, "/") {
			bad("retentionPolicy", "must not contain '/'")
		}
		cfg.V1, cfg.Bucket = true, db
		if rp != "" {
			cfg.Bucket = db + "/" + rp
		}
		switch {
		case token != "" && (user != "" || pass != ""):
			bad("token", "set either token or username/password, not both")
		case user != "":
			cfg.Token = user + ":" + pass
		case pass != "":
			bad("password", "needs username")
		default:
			cfg.Token = token
		}
	}
	if cfg.TestID == "" {
		cfg.TestID = "k6-" + now.UTC().Format("20060102T150405Z")
		cfg.TestIDAuto = true
	}
	for _, s := range []string{token, pass, cfg.Token} {
		if s != "" {
			cfg.secrets = append(cfg.secrets, s)
		}
	}
	return cfg, errs
}

// redact removes the configured secrets from a message.
func (c *influxConfig) redact(s string) string {
	// longest first, so "user:password" goes before "password"
	secrets := slices.Clone(c.secrets)
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// target describes where points go, without secrets.
func (c *influxConfig) target() string {
	if c.V1 {
		return fmt.Sprintf("%s database/rp %q (InfluxDB 1.8 API)", c.URL, c.Bucket)
	}
	return fmt.Sprintf("%s org %q bucket %q", c.URL, c.Org, c.Bucket)
}

// influxEvent is one observer call, copied.
type influxEvent struct {
	scenario, endpoint string
	isWindow           bool
	tr                 transitionRecord
	w                  detector.Window
}

// influxOutput is the output. Its observer methods are safe for concurrent
// use and never block; everything else runs on its own goroutines.
type influxOutput struct {
	cfg    influxConfig
	logger logrus.FieldLogger
	rs     *runState
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
	_ observer      = (*influxOutput)(nil)
)

func newInfluxOutput(p output.Params, rs *runState) (*influxOutput, error) {
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
	o.rs.addObserver(o)
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

// transition and window are the observer callbacks: copy, never block.
func (o *influxOutput) transition(scenario string, t transitionRecord) {
	o.push(influxEvent{scenario: scenario, endpoint: t.Endpoint, tr: t})
}

func (o *influxOutput) window(scenario, endpoint string, w detector.Window) {
	o.push(influxEvent{scenario: scenario, endpoint: endpoint, isWindow: true, w: w})
}

// iteration is not written: raw samples go through k6's own influxdb output.
func (o *influxOutput) iteration(string, int64, string, time.Time, float64) {}

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
	o.rs.removeObserver(o)
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
	rep := o.rs.report()
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
