package detector

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultConfigValid(t *testing.T) {
	t.Parallel()
	require.Empty(t, DefaultConfig().Validate())
	_, err := New(DefaultConfig())
	require.NoError(t, err)
}

func TestConfigValidateNamesEachOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		option string
		mutate func(*Config)
	}{
		{"window_min", func(c *Config) { c.WindowMin = 1 }},
		{"window_min_duration", func(c *Config) { c.WindowMinDuration = -1 }},
		{"max_windows", func(c *Config) { c.MaxWindows = 20 }},
		{"median_tolerance", func(c *Config) { c.MedianTolerance = 0 }},
		{"median_tolerance", func(c *Config) { c.MedianTolerance = math.NaN() }},
		{"tail_tolerance", func(c *Config) { c.TailTolerance = -0.1 }},
		{"mean_tolerance", func(c *Config) { c.MeanTolerance = -1 }},
		{"min_steady_fraction", func(c *Config) { c.MinSteadyFraction = 0.95 }},
		{"tail_quantile", func(c *Config) { c.TailQuantile = 100.5 }},
		{"tail_min_above", func(c *Config) { c.TailMinAbove = 0 }},
		{"noise_z", func(c *Config) { c.NoiseZ = -1 }},
		{"shift_z", func(c *Config) { c.ShiftZ = -1 }},
		{"shift_min", func(c *Config) { c.ShiftMin = 4 }},
		{"stable_windows", func(c *Config) { c.StableWindows = 1 }},
		{"relapse_windows", func(c *Config) { c.RelapseWindows = 0 }},
		{"cold_factor", func(c *Config) { c.ColdFactor = 1 }},
		{"cold_confirm", func(c *Config) { c.ColdConfirm = 0 }},
		{"cold_max", func(c *Config) { c.ColdMax = 1000 }},
		{"no_steady_windows", func(c *Config) { c.NoSteadyWindows = 0 }},
		{"sig_digits", func(c *Config) { c.SigDigits = 5 }},
		{"dynamic_range", func(c *Config) { c.DynamicRange = 2 }},
		{"method", func(c *Config) { c.Method = "fast" }},
		{"settle_windows", func(c *Config) { c.SettleWindows = 1 }},
		{"trend_tolerance", func(c *Config) { c.TrendTolerance = 0 }},
		{"tail_trend_tolerance", func(c *Config) { c.TailTrendTolerance = -0.1 }},
		{"relapse_tolerance", func(c *Config) { c.RelapseTolerance = math.Inf(1) }},
		{"search_windows", func(c *Config) { c.SearchWindows = 1 }},
	} {
		t.Run(tc.option, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tc.mutate(&c)
			errs := c.Validate()
			require.Len(t, errs, 1)
			require.Contains(t, errs[0].Error(), tc.option)
			require.Contains(t, errs[0].Error(), "must be")
			_, err := New(c)
			require.ErrorContains(t, err, tc.option)
		})
	}
}

func TestConfigValidateReportsAll(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.WindowMin = 0
	c.SigDigits = 0
	c.NoiseZ = 100
	require.Len(t, c.Validate(), 3)
}

func TestConfigJSONRoundTrip(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.WindowMinDuration = Duration(1500 * time.Millisecond)
	c.OnWindow = func(Window) {}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(b), `"window_min_duration":"1.5s"`)
	require.Contains(t, string(b), `"median_tolerance":0.03`)
	var back Config
	require.NoError(t, json.Unmarshal(b, &back))
	back.OnWindow = nil
	c.OnWindow = nil
	require.Equal(t, c, back)
	require.NoError(t, json.Unmarshal([]byte(`{"window_min_duration":2000000000}`), &back))
	require.Equal(t, Duration(2*time.Second), back.WindowMinDuration)
	require.Error(t, json.Unmarshal([]byte(`{"window_min_duration":"soon"}`), &back))
}

func TestServiceConfigCrossChecks(t *testing.T) {
	t.Parallel()
	c := ServiceConfig()
	c.SettleWindows = c.MaxWindows/2 + 1
	c.SearchWindows = c.MaxWindows
	errs := c.Validate()
	require.Len(t, errs, 2)
	require.ErrorContains(t, errs[0], "settle_windows")
	require.ErrorContains(t, errs[1], "search_windows")
}

func TestPresetsAreValid(t *testing.T) {
	t.Parallel()
	for name, mk := range Presets {
		require.Empty(t, mk().Validate(), name)
	}
	s, d := ServiceConfig(), DefaultConfig()
	require.Greater(t, s.MedianTolerance, d.MedianTolerance, "service latency gets a wider level band")
	require.Equal(t, MethodService, s.Method)
	require.Equal(t, MethodBenchmark, d.Method)
	require.Positive(t, s.WindowMinDuration, "service windows are a time span")
}
