package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// Tagging modes: how iterations get their regime tag.
const (
	TaggingAuto = "auto" // every iteration, from the hook k6 calls at each iteration start
	TaggingWrap = "wrap" // only iterations of functions passed through regime.wrap()
	TaggingOff  = "off"  // no tag; detection and summary still run
)

// Detection scopes: which samples feed one detector.
const (
	scopeScenario = "scenario" // one detector per scenario
	scopeEndpoint = "endpoint" // one detector per scenario x endpoint tag value
)

// Detection inputs.
const (
	inputIteration = "iteration" // iteration_duration of every full iteration (default)
	inputRequest   = "request"   // http_req_duration and grpc_req_duration (implied by scope endpoint)
	inputObserve   = "observe"   // only values passed to regime.observe()
)

var (
	validTagging = []string{TaggingAuto, TaggingWrap, TaggingOff}
	validScopes  = []string{scopeScenario, scopeEndpoint}
	validInputs  = []string{inputIteration, inputRequest, inputObserve}
)

// Bounds of maxEndpoints: the endpoint values per scenario that get a
// detector (scope endpoint) and rows of their own in the request breakdown.
const (
	defaultMaxEndpoints = 100
	maxMaxEndpoints     = 100_000
)

// ScenarioConfig is the detection set-up of one scenario.
type ScenarioConfig struct {
	Scope       string          `json:"scope"`
	Input       string          `json:"input"`
	EndpointTag string          `json:"endpointTag"`
	Detector    detector.Config `json:"detector"`
	// GateFraction: the steady gate passes when the scenario ends in steady
	// state and that steady state was declared early enough that its
	// iterations span at least this share of the scenario's time (a steady
	// state found in the last moments of a run is none to judge).
	GateFraction float64 `json:"gateFraction"`
	// MaxEndpoints caps the endpoint values of the scenario: further values
	// share one detector and one request row each, endpoint "(other)".
	MaxEndpoints int `json:"maxEndpoints"`
	// Priors are the profile's priors of the scenario's scopes (endpoint
	// "" for the scenario itself); nil without a profile.
	Priors map[string]results.Prior `json:"-"`
}

// Config is everything regime.configure() accepts, parsed and validated
// (ParseConfig). It is immutable once the first VU's init context has set
// it (RunState.Configure).
type Config struct {
	Tagging string `json:"tagging"`
	// SeriesLimit is how many points the results' iteration series keep per
	// scenario before they aggregate into buckets (results.IterSeries).
	SeriesLimit int                       `json:"-"`
	Track       []string                  `json:"-"` // custom metrics aggregated by phase in the summary
	Defaults    ScenarioConfig            `json:"-"`
	Scenarios   map[string]ScenarioConfig `json:"-"`
	// names of the scenarios the script declares, from options.scenarios
	// (just "default" when it declares none).
	Declared []string `json:"-"`
	// Profile judges the run (nil: none); ProfilePath is where it was read.
	Profile     *results.Profile `json:"-"`
	ProfilePath string           `json:"-"`
}

func defaultScenarioConfig() ScenarioConfig {
	return ScenarioConfig{
		Scope:        scopeScenario,
		Input:        inputIteration,
		EndpointTag:  "endpoint",
		Detector:     detector.ServiceConfig(),
		GateFraction: defaultGateFraction,
		MaxEndpoints: defaultMaxEndpoints,
	}
}

// defaultGateFraction: the final steady state must span half of the
// scenario, as MSER-style truncation rules require of a steady state
// (White 1997: a truncation point in the second half means no steady state).
const defaultGateFraction = 0.5

func defaultConfig() *Config {
	return &Config{Tagging: TaggingAuto, SeriesLimit: results.DefaultSeriesLimit, Defaults: defaultScenarioConfig()}
}

// Equal reports whether c and o are the same configuration as the run
// uses it: the same tagging, series limit, tracked metrics (in order),
// declared scenarios and profile (path and content), and for every
// scenario the same settings as forScenario gives them, so that a scenario
// listed with nothing of its own equals one left out, and an empty list or
// map equals none. Settings that spell out a default equal settings that
// leave it out.
func (c *Config) Equal(o *Config) bool {
	if c == nil || o == nil {
		return c == o
	}
	if c.Tagging != o.Tagging || c.SeriesLimit != o.SeriesLimit || c.ProfilePath != o.ProfilePath ||
		!slices.Equal(c.Track, o.Track) || !slices.Equal(c.Declared, o.Declared) ||
		!reflect.DeepEqual(c.Profile, o.Profile) || !sameScenario(c.Defaults, o.Defaults) {
		return false
	}
	for _, m := range []map[string]ScenarioConfig{c.Scenarios, o.Scenarios} {
		for name := range m {
			if !sameScenario(c.forScenario(name), o.forScenario(name)) {
				return false
			}
		}
	}
	return true
}

// sameScenario: every field is plain data (the detector's callbacks are set
// on the copies its scopes make, never here), so deep equality is equality,
// but for a nil and an empty map of priors.
func sameScenario(a, b ScenarioConfig) bool {
	if len(a.Priors) == 0 && len(b.Priors) == 0 {
		a.Priors, b.Priors = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// forScenario returns the configuration of the named scenario.
func (c *Config) forScenario(name string) ScenarioConfig {
	if sc, ok := c.Scenarios[name]; ok {
		return sc
	}
	return c.Defaults
}

// rawConfig is the JSON shape of the second argument of regime.configure().
type rawConfig struct {
	Tagging      *string                    `json:"tagging"`
	Track        []string                   `json:"track"`
	Scope        *string                    `json:"scope"`
	Input        *string                    `json:"input"`
	EndpointTag  *string                    `json:"endpointTag"`
	GateFraction *float64                   `json:"gateFraction"`
	SeriesLimit  *int                       `json:"seriesLimit"`
	Detector     json.RawMessage            `json:"detector"`
	MaxEndpoints *int                       `json:"maxEndpoints"`
	Profile      *string                    `json:"profile"`
	Scenarios    map[string]json.RawMessage `json:"scenarios"`
}

// Bounds of seriesLimit: every point costs about 40 bytes of memory.
const (
	minSeriesLimit = 1_000
	maxSeriesLimit = 10_000_000
)

type rawScenario struct {
	Scope        *string         `json:"scope"`
	Input        *string         `json:"input"`
	EndpointTag  *string         `json:"endpointTag"`
	GateFraction *float64        `json:"gateFraction"`
	Detector     json.RawMessage `json:"detector"`
	MaxEndpoints *int            `json:"maxEndpoints"`
}

// ParseConfig builds and validates a configuration from the script's
// options (for the scenario names) and the regime settings, both given as
// JSON, and the environment (lookupEnv: K6_REGIME_PROFILE, which names a
// profile). It reports every problem at once, each naming the option.
func ParseConfig(optionsJSON, settingsJSON []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	cfg := defaultConfig()
	var errs []error

	declared, err := declaredScenarios(optionsJSON)
	if err != nil {
		return nil, err
	}
	cfg.Declared = declared

	var raw rawConfig
	if len(bytes.TrimSpace(settingsJSON)) > 0 && string(bytes.TrimSpace(settingsJSON)) != "null" {
		if err := strictUnmarshal(settingsJSON, &raw); err != nil {
			return nil, fmt.Errorf("regime.configure: %w", err)
		}
	}
	cfg.Track = raw.Track
	if raw.SeriesLimit != nil {
		cfg.SeriesLimit = *raw.SeriesLimit
		if cfg.SeriesLimit < minSeriesLimit || cfg.SeriesLimit > maxSeriesLimit {
			errs = append(errs, fmt.Errorf("option 'seriesLimit' is %d; valid values: %d to %d (iterations kept one by one "+
				"per scenario in the results' series before they aggregate; about 40 bytes each)", cfg.SeriesLimit, minSeriesLimit, maxSeriesLimit))
		}
	}
	if raw.Tagging != nil {
		cfg.Tagging = *raw.Tagging
		if !contains(validTagging, cfg.Tagging) {
			errs = append(errs, fmt.Errorf("option 'tagging' is %q; valid values: %s",
				cfg.Tagging, strings.Join(validTagging, ", ")))
		}
	}
	errs = append(errs, applyScenario(&cfg.Defaults, "",
		rawScenario{Scope: raw.Scope, Input: raw.Input, EndpointTag: raw.EndpointTag, GateFraction: raw.GateFraction, Detector: raw.Detector,
			MaxEndpoints: raw.MaxEndpoints})...)

	names := make([]string, 0, len(raw.Scenarios))
	for name := range raw.Scenarios {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !contains(declared, name) {
			errs = append(errs, fmt.Errorf("option 'scenarios.%s': no such scenario in options.scenarios; valid names: %s",
				name, strings.Join(declared, ", ")))
			continue
		}
		var rs rawScenario
		if err := strictUnmarshal(raw.Scenarios[name], &rs); err != nil {
			errs = append(errs, fmt.Errorf("option 'scenarios.%s': %w", name, err))
			continue
		}
		sc := cfg.Defaults
		errs = append(errs, applyScenario(&sc, "scenarios."+name+".", rs)...)
		if cfg.Scenarios == nil {
			cfg.Scenarios = make(map[string]ScenarioConfig)
		}
		cfg.Scenarios[name] = sc
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("regime.configure: invalid settings:\n  %w", joinErrors(errs))
	}
	path := ""
	if raw.Profile != nil {
		if path = *raw.Profile; path == "" {
			return nil, errors.New("regime.configure: option 'profile' is empty; give the path of a profile.json (k6 x regime profile writes one) or leave it out")
		}
	}
	if env, ok := lookupEnv(profileEnv); ok && env != "" {
		path = env
	}
	if path != "" {
		if err := loadProfile(cfg, path); err != nil {
			return nil, fmt.Errorf("regime.configure: option 'profile' (or %s): %w", profileEnv, err)
		}
	}
	return cfg, nil
}

// parseConfig is ParseConfig without environment.
func parseConfig(optionsJSON, settingsJSON []byte) (*Config, error) {
	return ParseConfig(optionsJSON, settingsJSON, func(string) (string, bool) { return "", false })
}

func applyScenario(sc *ScenarioConfig, prefix string, rs rawScenario) []error {
	var errs []error
	if rs.Scope != nil {
		sc.Scope = *rs.Scope
	}
	if rs.Input != nil {
		sc.Input = *rs.Input
	}
	if rs.EndpointTag != nil {
		sc.EndpointTag = *rs.EndpointTag
	}
	if !contains(validScopes, sc.Scope) {
		errs = append(errs, fmt.Errorf("option '%sscope' is %q; valid values: %s",
			prefix, sc.Scope, strings.Join(validScopes, ", ")))
	}
	if !contains(validInputs, sc.Input) {
		errs = append(errs, fmt.Errorf("option '%sinput' is %q; valid values: %s",
			prefix, sc.Input, strings.Join(validInputs, ", ")))
	}
	if sc.Scope == scopeEndpoint && sc.Input == inputIteration {
		// an endpoint detector can only learn from that endpoint's requests
		sc.Input = inputRequest
	}
	if sc.Scope == scopeScenario && sc.Input == inputRequest {
		errs = append(errs, fmt.Errorf("option '%sinput' is %q, which needs '%sscope' to be %q",
			prefix, inputRequest, prefix, scopeEndpoint))
	}
	if rs.MaxEndpoints != nil {
		sc.MaxEndpoints = *rs.MaxEndpoints
	}
	if sc.MaxEndpoints < 1 || sc.MaxEndpoints > maxMaxEndpoints {
		errs = append(errs, fmt.Errorf("option '%smaxEndpoints' is %d; valid values: 1..%d (each endpoint value holds a detector "+
			"with scope 'endpoint', about 144 KiB with the default detector options, and its request rows, about 24 KiB per phase and regime)",
			prefix, sc.MaxEndpoints, maxMaxEndpoints))
	}
	if sc.EndpointTag == "" {
		errs = append(errs, fmt.Errorf("option '%sendpointTag' is empty; give the name of the tag that names endpoints", prefix))
	}
	if rs.GateFraction != nil {
		sc.GateFraction = *rs.GateFraction
		if !(sc.GateFraction >= 0 && sc.GateFraction <= 1) {
			errs = append(errs, fmt.Errorf("option '%sgateFraction' is %v; valid values: 0 to 1 (the share of the scenario "+
				"the final steady state must span; 0 only asks that the scenario ends steady)", prefix, sc.GateFraction))
		}
	}
	if len(bytes.TrimSpace(rs.Detector)) > 0 && string(bytes.TrimSpace(rs.Detector)) != "null" {
		// a detector object naming its method starts from that method's preset
		var m struct {
			Method *string `json:"method"`
		}
		if json.Unmarshal(rs.Detector, &m) == nil && m.Method != nil {
			if mk, ok := detector.Presets[*m.Method]; ok && *m.Method != sc.Detector.Method {
				sc.Detector = mk()
			}
		}
		if err := strictUnmarshal(rs.Detector, &sc.Detector); err != nil {
			errs = append(errs, fmt.Errorf("option '%sdetector': %w", prefix, err))
		}
	}
	for _, err := range sc.Detector.Validate() {
		errs = append(errs, fmt.Errorf("option '%sdetector': %w", prefix, err))
	}
	return errs
}

// declaredScenarios returns the scenario names of a k6 options object.
func declaredScenarios(optionsJSON []byte) ([]string, error) {
	if len(bytes.TrimSpace(optionsJSON)) == 0 || string(bytes.TrimSpace(optionsJSON)) == "null" {
		return []string{"default"}, nil
	}
	var opts struct {
		Scenarios map[string]json.RawMessage `json:"scenarios"`
	}
	if err := json.Unmarshal(optionsJSON, &opts); err != nil {
		return nil, fmt.Errorf("regime.configure: the first argument must be the script's options object: %w", err)
	}
	if len(opts.Scenarios) == 0 {
		return []string{"default"}, nil
	}
	names := make([]string, 0, len(opts.Scenarios))
	for name := range opts.Scenarios {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// strictUnmarshal decodes JSON and rejects unknown keys, like k6's own
// option parsing.
func strictUnmarshal(data []byte, v any) error {
	if t := bytes.TrimSpace(data); string(t) == "null" {
		return nil // no settings: the defaults
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return fmt.Errorf("must be an object of settings, got %s", jsonKind(data))
	}
	rv := reflect.ValueOf(v).Elem()
	fields := make(map[string]int, rv.NumField())
	valid := make([]string, 0, rv.NumField())
	for i := range rv.NumField() {
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = i
		valid = append(valid, name)
	}
	sort.Strings(valid)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		i, ok := fields[k]
		if !ok {
			// encoding/json matches keys case-insensitively: so did this
			for name, j := range fields {
				if strings.EqualFold(name, k) {
					i, ok = j, true
					break
				}
			}
		}
		if !ok {
			errs = append(errs, fmt.Errorf("unknown key %q; valid keys: %s", k, strings.Join(valid, ", ")))
			continue
		}
		f := rv.Field(i)
		if err := json.Unmarshal(m[k], f.Addr().Interface()); err != nil {
			var detail string
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) {
				detail = ": " + strings.TrimPrefix(err.Error(), "json: ")
			}
			errs = append(errs, fmt.Errorf("key %q must be %s, got %s%s", k, jsonWant(f.Type()), jsonKind(m[k]), detail))
		}
	}
	if len(errs) > 0 {
		return joinErrors(errs)
	}
	return nil
}

// jsonWant names the JSON a Go type reads, for errors.
func jsonWant(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[json.RawMessage]():
		return "an object"
	case t == reflect.TypeFor[detector.Duration]():
		return `a duration such as "1s" or "250ms" (or a number of nanoseconds)`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(jsonWant(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// jsonKind names the kind of a JSON value, for errors.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string " + string(b)
	case 't', 'f':
		return string(b)
	case 'n':
		return "null"
	}
	return "the number " + string(b)
}

func joinErrors(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "\n  "))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
