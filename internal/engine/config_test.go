package engine

import (
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
		{"unknown key", `{"tagz":"auto"}`, `unknown field "tagz"`},
		{"bad tagging", `{"tagging":"manual"}`, "option 'tagging' is \"manual\"; valid values: auto, wrap, off"},
		{"bad input", `{"input":"samples"}`, "option 'input' is \"samples\"; valid values: iteration, request, observe"},
		{"request needs endpoint", `{"input":"request"}`, "needs 'scope' to be \"endpoint\""},
		{"detector range", `{"scenarios":{"gameplay":{"detector":{"median_tolerance":-1}}}}`, "option 'scenarios.gameplay.detector': median_tolerance"},
		{"detector unknown", `{"detector":{"windowz":3}}`, `option 'detector': unknown field "windowz"`},
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
