package engine

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigureValidation(t *testing.T) {
	t.Parallel()
	opts := `{"scenarios":{"warmup":{},"gameplay":{}}}`
	cases := []struct {
		name, settings, want string
	}{
		{"unknown scenario", `{"scenarios":{"init":{}}}`, "option 'scenarios.init': no such scenario in options.scenarios; valid names: gameplay, warmup"},
		{"unknown key", `{"tagz":"auto"}`, `regime.configure: unknown key "tagz"; valid keys: detector, endpointTag, gateFraction, input, maxEndpoints, profile, scenarios, scope, seriesLimit, tagging, track`},
		{"wrong type", `{"tagging":1,"gateFraction":"half","track":"x"}`, `key "gateFraction" must be a number, got a string "half"
  key "tagging" must be a string, got the number 1
  key "track" must be a list of strings, got a string "x"`},
		{"scenario wrong type", `{"scenarios":{"gameplay":{"maxEndpoints":2.5}}}`, `option 'scenarios.gameplay': key "maxEndpoints" must be an integer, got the number 2.5`},
		{"detector duration", `{"detector":{"window_min_duration":true}}`, `option 'detector': key "window_min_duration" must be a duration such as "1s" or "250ms"`},
		{"not an object", `{"scenarios":{"gameplay":[]}}`, `option 'scenarios.gameplay': must be an object of settings, got a list`},
		{"bad tagging", `{"tagging":"manual"}`, "option 'tagging' is \"manual\"; valid values: auto, wrap, off"},
		{"bad input", `{"input":"samples"}`, "option 'input' is \"samples\"; valid values: iteration, request, observe"},
		{"request needs endpoint", `{"input":"request"}`, "needs 'scope' to be \"endpoint\""},
		{"detector range", `{"scenarios":{"gameplay":{"detector":{"median_tolerance":-1}}}}`, "option 'scenarios.gameplay.detector': median_tolerance"},
		{"detector unknown", `{"detector":{"windowz":3}}`, `option 'detector': unknown key "windowz"; valid keys: burst_z, cold_confirm,`},
		{"maxEndpoints", `{"scenarios":{"gameplay":{"maxEndpoints":0}}}`, "option 'scenarios.gameplay.maxEndpoints' is 0; valid values: 1..100000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig([]byte(opts), []byte(tc.settings))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("several problems at once", func(t *testing.T) {
		t.Parallel()
		_, err := parseConfig([]byte(opts), []byte(`{"tagging":"x","scope":"y"}`))
		require.ErrorContains(t, err, "'tagging'")
		require.ErrorContains(t, err, "'scope'")
	})
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseConfig([]byte(opts), []byte(`{"scenarios":{"gameplay":{"scope":"endpoint"}}}`))
		require.NoError(t, err)
		require.Equal(t, scopeEndpoint, cfg.forScenario("gameplay").Scope)
		require.Equal(t, inputRequest, cfg.forScenario("gameplay").Input)
		require.Equal(t, scopeScenario, cfg.forScenario("warmup").Scope)
		require.Equal(t, []string{"gameplay", "warmup"}, cfg.Declared)
	})
	t.Run("no scenarios means default", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseConfig([]byte(`{"vus":2}`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"default"}, cfg.Declared)
	})
}

// TestConfigEqual: configurations parsed from settings equal as JSON are
// Equal whatever the order of their keys, and so are those of options that
// declare the same scenarios; any other setting makes them differ.
func TestConfigEqual(t *testing.T) {
	t.Parallel()
	parse := func(opts, settings string) *Config {
		t.Helper()
		cfg, err := parseConfig([]byte(opts), []byte(settings))
		require.NoError(t, err)
		return cfg
	}
	opts := `{"scenarios":{"a":{"executor":"constant-vus"},"b":{}}}`
	base := parse(opts, `{"tagging":"wrap","track":["x","y"],"scenarios":{"a":{"scope":"endpoint","detector":{"window_min":30,"method":"service"}}}}`)
	for _, tc := range []struct {
		name, opts, settings string
		equal                bool
	}{
		{"the same", opts, `{"tagging":"wrap","track":["x","y"],"scenarios":{"a":{"scope":"endpoint","detector":{"window_min":30,"method":"service"}}}}`, true},
		{"a scenario listed with nothing of its own", opts,
			`{"tagging":"wrap","track":["x","y"],"scenarios":{"b":{},"a":{"scope":"endpoint","detector":{"window_min":30}}}}`, true},
		{"keys in another order", `{"scenarios":{"b":{},"a":{"executor":"constant-vus"}}}`,
			`{"scenarios":{"a":{"detector":{"method":"service","window_min":30},"scope":"endpoint"}},"track":["x","y"],"tagging":"wrap"}`, true},
		{"defaults spelt out", opts, `{"tagging":"wrap","track":["x","y"],"input":"iteration","scenarios":{"a":{"scope":"endpoint","input":"request","detector":{"window_min":30}}}}`, true},
		{"options other than the scenarios' names", `{"vus":3,"scenarios":{"a":{"executor":"shared-iterations"},"b":{}}}`,
			`{"tagging":"wrap","track":["x","y"],"scenarios":{"a":{"scope":"endpoint","detector":{"window_min":30}}}}`, true},
		{"another tagging", opts, `{"tagging":"auto","track":["x","y"],"scenarios":{"a":{"scope":"endpoint","detector":{"window_min":30}}}}`, false},
		{"tracked in another order", opts, `{"tagging":"wrap","track":["y","x"],"scenarios":{"a":{"scope":"endpoint","detector":{"window_min":30}}}}`, false},
		{"another detector setting", opts, `{"tagging":"wrap","track":["x","y"],"scenarios":{"a":{"scope":"endpoint","detector":{"window_min":31}}}}`, false},
		{"another scenario", `{"scenarios":{"a":{},"c":{}}}`, `{"tagging":"wrap","track":["x","y"],"scenarios":{"a":{"scope":"endpoint","detector":{"window_min":30}}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.equal, base.Equal(parse(tc.opts, tc.settings)))
		})
	}
	require.True(t, parse(opts, `{"track":[]}`).Equal(parse(opts, `{}`)), "track: [] and no track")
	require.True(t, parse(opts, `{"scenarios":{"a":{}}}`).Equal(parse(opts, `{}`)), "a scenario listed with nothing of its own")
	require.Equal(t, 8, reflect.TypeFor[Config]().NumField(), "a field added to Config: compare it in Config.Equal, then count it here")
	require.False(t, base.Equal(nil))
	require.True(t, (*Config)(nil).Equal(nil))

	path := testProfile(t)
	withProfile := func() *Config {
		cfg, err := ParseConfig([]byte(`{"scenarios":{"load":{}}}`), []byte(`{"profile":`+jsonString(path)+`}`),
			func(string) (string, bool) { return "", false })
		require.NoError(t, err)
		return cfg
	}
	require.True(t, withProfile().Equal(withProfile()), "a profile read twice")
	require.False(t, withProfile().Equal(parse(`{"scenarios":{"load":{}}}`, `{}`)))
}

// TestConfigureLenientAsJSON: what encoding/json accepted before the strict
// decoder named keys and types is still accepted: null for no settings,
// and keys in another case.
func TestConfigureLenientAsJSON(t *testing.T) {
	t.Parallel()
	opts := `{"scenarios":{"warmup":{},"gameplay":{}}}`
	cfg, err := parseConfig([]byte(opts), []byte(`{"scenarios":{"gameplay":null},"Tagging":"off"}`))
	require.NoError(t, err)
	require.Equal(t, TaggingOff, cfg.Tagging)
}
