package influxdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The xk6-regime-influxdb output's settings (the package doc describes the
// output): their names, defaults and environment variables, and the layers
// they come from, lowest precedence first: defaults, the JSON config,
// K6_REGIME_INFLUXDB_* environment variables, the --out argument. Every
// problem is reported at once, naming its source; a password or token is
// never repeated in an error.

const envPrefix = "K6_REGIME_INFLUXDB_"

// option describes one setting: its name in JSON and in the --out
// query, its environment variable and its default.
type option struct {
	key    string
	env    string
	def    string
	secret bool
}

var options = []option{
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

func optionByKey(key string) (option, bool) {
	for _, o := range options {
		if o.key == key {
			return o, true
		}
	}
	return option{}, false
}

func optionKeys() string {
	keys := make([]string, len(options))
	for i, o := range options {
		keys[i] = o.key
	}
	return strings.Join(keys, ", ")
}

// rawSetting is one setting's value and where it came from (for errors).
type rawSetting struct {
	value, source string
}

// config is the validated configuration of the output.
type config struct {
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

// parseConfig layers defaults, the JSON config, the environment and
// the --out argument, then validates the result, reporting every problem.
// runTags are the run's --tag values (testid defaults to tags.testid).
func parseConfig(jsonConf json.RawMessage, env map[string]string, arg string, runTags map[string]string, now time.Time) (config, error) {
	set := map[string]rawSetting{}
	for _, o := range options {
		if o.def != "" {
			set[o.key] = rawSetting{o.def, "default"}
		}
	}
	var errs []error
	errs = append(errs, layerJSON(set, jsonConf)...)
	errs = append(errs, layerEnv(set, env)...)
	errs = append(errs, layerArg(set, arg)...)
	if _, ok := set["testid"]; !ok {
		if id := runTags["testid"]; id != "" {
			set["testid"] = rawSetting{id, "--tag testid"}
		}
	}
	// the values' errors too, beside an unknown setting's: every invalid
	// setting is said at once
	cfg, verrs := validateConfig(set, now)
	if errs = append(errs, verrs...); len(errs) > 0 {
		return config{}, configError(errs)
	}
	return cfg, nil
}

func configError(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = "  - " + e.Error()
	}
	return fmt.Errorf("%s: invalid configuration:\n%s", Name, strings.Join(msgs, "\n"))
}

// layerJSON applies the JSON config: an object of the same keys as the
// --out query; numbers and booleans are accepted for numeric settings.
func layerJSON(set map[string]rawSetting, raw json.RawMessage) []error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return []error{fmt.Errorf("JSON config (collectors.%s) must be an object: %w", Name, err)}
	}
	var errs []error
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		src := fmt.Sprintf("JSON config key %q", k)
		if _, ok := optionByKey(k); !ok {
			errs = append(errs, fmt.Errorf("%s: unknown setting; valid keys: %s", src, optionKeys()))
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
		if strings.HasPrefix(name, envPrefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		suffix := strings.TrimPrefix(name, envPrefix)
		i := slices.IndexFunc(options, func(o option) bool { return o.env == suffix })
		if i < 0 {
			valid := make([]string, len(options))
			for j, o := range options {
				valid[j] = envPrefix + o.env
			}
			errs = append(errs, fmt.Errorf("unknown environment variable %s; valid ones: %s", name, strings.Join(valid, ", ")))
			continue
		}
		o := options[i]
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
	if u.Hostname() == "" {
		errs = append(errs, fmt.Errorf("%s: URL has no host (want http://host:port)", source))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("%s: URL port %s is not a port (1 to 65535)", source, p))
		}
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
			if _, ok := optionByKey(k); !ok || k == "url" {
				errs = append(errs, fmt.Errorf("%s: unknown setting; valid ones: %s", src, strings.TrimPrefix(optionKeys(), "url, ")))
				continue
			}
			if k == "database" && path != "" && q.Get(k) != path {
				errs = append(errs, fmt.Errorf("%s: database %q and the URL path's database %q: name it once", src, q.Get(k), path))
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

// validateConfig checks every setting and derives the write target.
func validateConfig(set map[string]rawSetting, now time.Time) (config, []error) {
	r := &settingReader{set: set}
	cfg := config{URL: r.get("url"), TestID: r.get("testid")}
	if cfg.URL == "" {
		r.bad("url", "must be an http:// or https:// URL such as http://127.0.0.1:8086")
	}
	r.limits(&cfg)
	r.destination(&cfg)
	if cfg.TestID == "" {
		cfg.TestID = "k6-" + now.UTC().Format("20060102T150405Z")
		cfg.TestIDAuto = true
	}
	for _, s := range []string{r.get("token"), r.get("password"), cfg.Token} {
		if s != "" {
			cfg.secrets = append(cfg.secrets, s)
		}
	}
	return cfg, r.errs
}

// settingReader reads the layered settings, collecting every problem.
type settingReader struct {
	set  map[string]rawSetting
	errs []error
}

func (r *settingReader) get(k string) string { return r.set[k].value }

// bad records that setting k is not what it must be (want); a secret's
// value is not repeated.
func (r *settingReader) bad(k, want string) {
	o, _ := optionByKey(k)
	v := strconv.Quote(r.set[k].value)
	if o.secret {
		v = "[redacted]"
	}
	r.errs = append(r.errs, fmt.Errorf("%s=%s (from %s): %s", k, v, r.set[k].source, want))
}

func (r *settingReader) intIn(k string, lo, hi int) int {
	n, err := strconv.Atoi(strings.TrimSpace(r.get(k)))
	if err != nil || n < lo || n > hi {
		r.bad(k, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
	}
	return n
}

func (r *settingReader) durIn(k string, lo, hi time.Duration) time.Duration {
	s := strings.TrimSpace(r.get(k))
	d, err := time.ParseDuration(s)
	if err != nil {
		// a bare number is milliseconds, as in k6's JSON durations
		ms, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			r.bad(k, fmt.Sprintf("must be a duration from %s to %s such as \"1s\" or \"500ms\"", lo, hi))
			return 0
		}
		d = time.Duration(ms * float64(time.Millisecond))
	}
	if d < lo || d > hi {
		r.bad(k, fmt.Sprintf("must be a duration from %s to %s", lo, hi))
	}
	return d
}

// limits reads the batching, buffer, timeout and retry settings.
func (r *settingReader) limits(cfg *config) {
	cfg.FlushInterval = r.durIn("flushInterval", 10*time.Millisecond, time.Hour)
	cfg.BatchSize = r.intIn("batchSize", 1, 100_000)
	cfg.BufferLimit = r.intIn("bufferLimit", 1, 10_000_000)
	cfg.Timeout = r.durIn("timeout", 100*time.Millisecond, 10*time.Minute)
	cfg.MaxRetries = r.intIn("maxRetries", 0, 100)
	cfg.RetryInterval = r.durIn("retryInterval", time.Millisecond, 10*time.Minute)
	cfg.MaxRetryInterval = r.durIn("maxRetryInterval", time.Millisecond, time.Hour)
	// at least 100 ms: with no wait at all the run's summary points are
	// never written
	cfg.StopTimeout = r.durIn("stopTimeout", 100*time.Millisecond, time.Hour)
	// the other setting's source too: beside an unknown (misspelt) setting,
	// "from default" says that the value meant for it did not apply
	if cfg.BufferLimit > 0 && cfg.BatchSize > cfg.BufferLimit {
		r.bad("batchSize", fmt.Sprintf("must not exceed bufferLimit (%d, from %s)", cfg.BufferLimit, r.set["bufferLimit"].source))
	}
	if cfg.MaxRetryInterval > 0 && cfg.RetryInterval > cfg.MaxRetryInterval {
		r.bad("retryInterval", fmt.Sprintf("must not exceed maxRetryInterval (%s, from %s)", cfg.MaxRetryInterval, r.set["maxRetryInterval"].source))
	}
}

// destination reads where the points go and with which credentials:
// bucket, org and token (InfluxDB 2.x), or database, retention policy and
// username/password or token (InfluxDB 1.8, through its /api/v2/write
// compatibility endpoint).
func (r *settingReader) destination(cfg *config) {
	db, rp, bucket := r.get("database"), r.get("retentionPolicy"), r.get("bucket")
	user, pass, token := r.get("username"), r.get("password"), r.get("token")
	if bucket != "" { // InfluxDB 2.x
		if db != "" {
			r.bad("database", "set either bucket and org (InfluxDB 2.x) or database (InfluxDB 1.8), not both")
		}
		if rp != "" {
			r.bad("retentionPolicy", "is for InfluxDB 1.8 (database); with bucket, leave it empty")
		}
		if user != "" || pass != "" {
			r.bad("username", "username/password are for InfluxDB 1.8 (database); InfluxDB 2.x needs token")
		}
		if r.get("org") == "" {
			r.errs = append(r.errs, fmt.Errorf("org is required with bucket=%q (InfluxDB 2.x); set %sORG or ?org=", bucket, envPrefix))
		}
		cfg.Org, cfg.Bucket, cfg.Token = r.get("org"), bucket, token
		return
	}
	if db == "" {
		db = "k6"
	}
	if strings.Contains(db, "/") {
		r.bad("database", "must not contain '/' (set the retention policy with retentionPolicy)")
	}
	if strings.Contains(rp, "/") {
		r.bad("retentionPolicy", "must not contain '/'")
	}
	cfg.V1, cfg.Bucket = true, db
	if rp != "" {
		cfg.Bucket = db + "/" + rp
	}
	switch {
	case token != "" && (user != "" || pass != ""):
		r.bad("token", "set either token or username/password, not both")
	case user != "":
		cfg.Token = user + ":" + pass
	case pass != "":
		r.bad("password", "needs username")
	default:
		cfg.Token = token
	}
}

// redact removes the configured secrets from a message.
func (c *config) redact(s string) string {
	// longest first, so "user:password" goes before "password"
	secrets := slices.Clone(c.secrets)
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// target describes where points go, without secrets.
func (c *config) target() string {
	if c.V1 {
		return fmt.Sprintf("%s database/rp %q (InfluxDB 1.8 API)", c.URL, c.Bucket)
	}
	return fmt.Sprintf("%s org %q bucket %q", c.URL, c.Org, c.Bucket)
}
