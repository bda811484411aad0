package engine

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// profileEnv names the environment variable that gives a profile.json to
// a run (CI sets it; it wins over regime.configure's profile setting).
const profileEnv = "K6_REGIME_PROFILE"

// loadProfile reads the profile of a run and fits it to the script: every
// declared scenario gets the priors of its scopes (the scenario, and each
// endpoint the profile has), which its detectors take as they are made.
func loadProfile(cfg *Config, path string) error {
	p, err := results.LoadProfile(path)
	if err != nil {
		return err
	}
	if err := p.MatchScenarios(cfg.Declared); err != nil {
		return fmt.Errorf("%w (%s)", err, path)
	}
	if cfg.Scenarios == nil {
		cfg.Scenarios = map[string]ScenarioConfig{}
	}
	for _, name := range cfg.Declared {
		sc := cfg.forScenario(name)
		if sc.Detector.Method != detector.MethodService {
			return fmt.Errorf("profile: scenario %s uses the detector method %q; a profile's prior needs %q",
				name, sc.Detector.Method, detector.MethodService)
		}
		sc.Priors = map[string]results.Prior{}
		for _, scope := range p.Scopes {
			if scope.Scenario == name {
				if pr := scope.Prior(); pr.Ok {
					// the detector built with this prior must be valid: a
					// damaged profile, or detector options that only a prior
					// makes count (prior_windows), are refused here, at
					// init, not by a detector that fails mid-run
					if errs := pr.Apply(sc.Detector).Validate(); len(errs) > 0 {
						where := "scenario " + name
						if scope.Endpoint != "" {
							where += ", endpoint " + scope.Endpoint
						}
						return fmt.Errorf("profile: %s, %s: its prior makes an invalid detector configuration: %w",
							path, where, errors.Join(errs...))
					}
					sc.Priors[scope.Endpoint] = pr
				}
			}
		}
		cfg.Scenarios[name] = sc
	}
	cfg.Profile, cfg.ProfilePath = p, path
	return nil
}

// profileChecks sets a scenario's settled view against the run's profile
// (none without one) and returns the checks with their samples:
// regime_profile_ttss, _p50 and _p99 (the run's figure / the profile's),
// and regime_profile_checks, one sample per figure the profile has, tagged
// figure:<ttss|p50|p99>, 1 when the run's figure was compared and 0 when it
// was not (and a 0 of the scope when it has no check): a count>0 guard on
// the scope fails when nothing was compared, and one on a figure fails when
// the profile lacks that figure (no sample; a profile learnt only from
// merged folders has no p99) or the run does. Callers hold st.mu.
func (rs *RunState) profileChecks(st *Scenario, now time.Time) ([]results.ProfileCheck, metrics.Samples) {
	cfg := rs.cfg.Load()
	if cfg == nil || cfg.Profile == nil {
		return nil, nil
	}
	checks := cfg.Profile.CheckSettled(st.name, st.settled)
	var out metrics.Samples
	// the endpoints' samples first, the scenario's last: a threshold on
	// regime_profile_p50{scenario:S} also matches the endpoints' samples,
	// and k6 judges a gauge's last value
	var endpoints []string
	seen := map[string]bool{}
	for _, c := range checks {
		if !seen[c.Endpoint] && c.Endpoint != "" {
			endpoints = append(endpoints, c.Endpoint)
		}
		seen[c.Endpoint] = true
	}
	sort.Strings(endpoints)
	for _, ep := range append(endpoints, "") {
		var compared metrics.Samples
		scoped := false
		for _, c := range checks {
			if c.Endpoint != ep {
				continue
			}
			scoped = true
			done := 0.0
			if c.Ratio != nil {
				done = 1
				m := map[string]*metrics.Metric{results.CheckTTSS: rs.m.profileTTSS, results.CheckP50: rs.m.profileP50, results.CheckP99: rs.m.profileP99}[c.Figure]
				out = append(out, rs.scopeSample(m, st, ep, now, *c.Ratio))
			}
			s := rs.scopeSample(rs.m.profileChecks, st, ep, now, done)
			s.Tags = s.Tags.With("figure", c.Figure)
			compared = append(compared, s)
		}
		if !scoped {
			compared = append(compared, rs.scopeSample(rs.m.profileChecks, st, ep, now, 0))
		}
		out = append(out, compared...)
	}
	rs.profileMu.Lock()
	rs.profileResults = append(rs.profileResults, checks...)
	rs.profileMu.Unlock()
	return checks, out
}

// profileLoad sets the scenario's iteration rate against the rate the
// profile was learnt at: an error (logged as a warning) when the run is of
// another load, whose checks compare unlike runs. Callers hold st.mu.
func (rs *RunState) profileLoad(st *Scenario) error {
	cfg := rs.cfg.Load()
	if cfg == nil || cfg.Profile == nil || st.firstSeen.IsZero() {
		return nil
	}
	span := st.lastSeen.Sub(st.firstSeen).Seconds()
	if span <= 0 {
		return nil
	}
	return cfg.Profile.CheckLoad(st.name, float64(st.iterations())/span, results.ProfileRateTolerance)
}

// scopeSample is a sample with the scenario's tags (and the endpoint's).
func (rs *RunState) scopeSample(m *metrics.Metric, st *Scenario, endpoint string, t time.Time, v float64) metrics.Sample {
	s := rs.sample(m, st, t, v)
	if endpoint != "" {
		s.Tags = s.Tags.With(st.cfg.EndpointTag, endpoint)
	}
	return s
}

// profileUse is summary.json's profile: which profile judged the run, and
// its checks (nil without a profile).
func (rs *RunState) profileUse() *results.ProfileUse {
	cfg := rs.cfg.Load()
	if cfg == nil || cfg.Profile == nil {
		return nil
	}
	u := cfg.Profile.Use(cfg.ProfilePath)
	rs.profileMu.Lock()
	u.Checks = append(u.Checks, rs.profileResults...)
	rs.profileMu.Unlock()
	return u
}
