package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// testProfile writes a profile of scenario "load" (and its endpoint
// "claim"): warm-up end 12 s, level 5 ms.
func testProfile(t *testing.T, scenarios ...string) string {
	t.Helper()
	if len(scenarios) == 0 {
		scenarios = []string{"load"}
	}
	p := results.Profile{Schema: results.ProfileSchema, BlockMs: 1000}
	d := results.ProfileDist{N: 5, Min: 10, Median: 20, P90: 30, Max: 40}
	for _, s := range scenarios {
		for _, ep := range []string{"", "claim"} {
			p.Scopes = append(p.Scopes, &results.ProfileScope{Scenario: s, Endpoint: ep,
				WarmupEnd: results.ProfileDist{N: 5, Min: 10000, Median: 12000, P90: 14000, Max: 15000},
				LevelMs:   5, LevelSpread: results.Interval{Lo: -0.05, Hi: 0.06},
				Envelope:  results.ProfileEnvelope{Median: results.Interval{Lo: -0.15, Hi: 0.2}},
				SteadyP50: &d, SteadyP99: &d, TTSS: &d})
		}
	}
	path := filepath.Join(t.TempDir(), "profile.json")
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// TestConfigureProfile: regime.configure's profile (or K6_REGIME_PROFILE,
// which wins) gives every scope of the script the profile's prior; a
// profile of other scenarios, an empty path, a missing file and the
// benchmark method are errors naming the option.
func TestConfigureProfile(t *testing.T) {
	t.Parallel()
	opts := []byte(`{"scenarios":{"load":{"executor":"constant-vus"}}}`)
	path := testProfile(t)
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := ParseConfig(opts, []byte(`{"profile":`+jsonString(path)+`}`), noEnv)
	require.NoError(t, err)
	require.Equal(t, path, cfg.ProfilePath)
	sc := cfg.forScenario("load")
	require.True(t, sc.Priors[""].Ok)
	require.Equal(t, 12000.0, sc.Priors[""].WarmupMs)
	require.Equal(t, -0.15, sc.Priors[""].Low, "the band of levels: the spread widened by the envelope")
	require.Equal(t, 0.2, sc.Priors[""].High)
	require.True(t, sc.Priors["claim"].Ok)

	// the scenario's detector takes its prior when it is made
	st := newScenario("load", sc)
	dc := st.scopeFor("", func(*endpointScope, detector.Transition) {}, nil).det.Config()
	require.Equal(t, detector.Duration(12*time.Second), dc.PriorWarmup)
	require.Equal(t, 5.0, dc.PriorLevel)
	none := st.scopeFor("other", func(*endpointScope, detector.Transition) {}, nil).det.Config()
	require.Zero(t, none.PriorLevel, "no prior for an endpoint the profile does not have")

	env := func(k string) (string, bool) {
		if k == profileEnv {
			return path, true
		}
		return "", false
	}
	cfg, err = ParseConfig(opts, []byte(`{"profile":"elsewhere.json"}`), env)
	require.NoError(t, err, "K6_REGIME_PROFILE wins over the setting")
	require.Equal(t, path, cfg.ProfilePath)

	_, err = ParseConfig(opts, []byte(`{"profile":`+jsonString(testProfile(t, "browse"))+`}`), noEnv)
	require.ErrorContains(t, err, "option 'profile' (or K6_REGIME_PROFILE): profile: it was learnt from scenarios browse, the script declares load")
	_, err = ParseConfig(opts, []byte(`{"profile":""}`), noEnv)
	require.ErrorContains(t, err, "option 'profile' is empty")
	_, err = ParseConfig(opts, []byte(`{"profile":"/nonexistent/profile.json"}`), noEnv)
	require.ErrorContains(t, err, "no such file")
	_, err = ParseConfig(opts, []byte(`{"profile":`+jsonString(path)+`,"detector":{"method":"benchmark"}}`), noEnv)
	require.ErrorContains(t, err, `uses the detector method "benchmark"; a profile's prior needs "service"`)
	// options only a prior makes count are checked with it, at init: a
	// detector that refuses its configuration mid-run once panicked k6
	_, err = ParseConfig(opts, []byte(`{"profile":`+jsonString(path)+`,"detector":{"prior_windows":1}}`), noEnv)
	require.ErrorContains(t, err, "scenario load: its prior makes an invalid detector configuration")
	require.ErrorContains(t, err, "prior_windows")

	cfg, err = ParseConfig(opts, nil, noEnv)
	require.NoError(t, err)
	require.Nil(t, cfg.Profile, "no profile, no priors")
	require.Nil(t, cfg.forScenario("load").Priors)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestProfileLoad: a run judged by a profile at another iteration rate than
// the profile's runs is named (the run logs it as a warning at its end);
// the same rate, a profile without rates, or no profile pass.
func TestProfileLoad(t *testing.T) {
	t.Parallel()
	rs := NewRunState()
	st := newScenario("load", ScenarioConfig{})
	t0 := time.Unix(1_700_000_000, 0)
	st.firstSeen, st.lastSeen = t0, t0.Add(10*time.Second)
	st.tagged[0].count, st.tagged[2].count, st.untagged = 100, 2350, 50 // 250 iterations/s
	require.NoError(t, rs.profileLoad(st), "no profile")
	rs.cfg.Store(&Config{Profile: &results.Profile{RatesPerS: map[string]float64{"load": 100}}})
	require.EqualError(t, rs.profileLoad(st), "profile: scenario load ran 250.0 iterations/s, the profile's runs 100.0 "+
		"(more than 20% apart): another load (or, with a fixed number of VUs, a service of another speed); "+
		"a profile judges runs of the script and load it was learnt from")
	rs.cfg.Store(&Config{Profile: &results.Profile{RatesPerS: map[string]float64{"load": 240}}})
	require.NoError(t, rs.profileLoad(st))
	rs.cfg.Store(&Config{Profile: &results.Profile{}})
	require.NoError(t, rs.profileLoad(st), "a profile of an older version, without rates")
}
