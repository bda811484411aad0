package engine

import (
	"strings"
	"testing"

	"github.com/xk6-regime/xk6-regime/detector"
)

// FuzzParseConfig: regime.configure()'s options and settings, as the JSON
// the JS side hands over. Any input is accepted or refused with an error
// naming regime.configure; an accepted configuration builds a detector for
// every scenario (validation let nothing through that the detector
// rejects) and has a usable endpoint cap. Seed corpus in
// testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	for _, c := range [][2]string{
		{`{"scenarios":{"a":{},"b":{}}}`, `{"tagging":"wrap","scope":"endpoint","maxEndpoints":5,"scenarios":{"a":{"input":"observe","detector":{"window_min":20}}}}`},
		{`{"scenarios":{"a":{}}}`, `{"scenarios":{"a":{"detector":{"window_min_duration":"2s","max_windows":65536,"sig_digits":4,"dynamic_range":1e6}}}}`},
		{`null`, `null`},
		{`{"vus":2}`, `{"detector":{"median_tolerance":NaN}}`},
		{`{"scenarios":{"a":null}}`, `{"scenarios":{"a":null},"track":["x"]}`},
		{`[]`, `{"maxEndpoints":0}`},
	} {
		f.Add([]byte(c[0]), []byte(c[1]))
	}
	f.Fuzz(func(t *testing.T, opts, settings []byte) {
		cfg, err := parseConfig(opts, settings)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "regime.configure") {
				t.Fatalf("error does not name regime.configure: %v", err)
			}
			return
		}
		check := func(name string, sc ScenarioConfig) {
			if sc.MaxEndpoints < 1 || sc.MaxEndpoints > maxMaxEndpoints {
				t.Fatalf("scenario %q: maxEndpoints %d accepted", name, sc.MaxEndpoints)
			}
			if _, err := detector.New(sc.Detector); err != nil {
				t.Fatalf("scenario %q: accepted detector settings the detector refuses: %v", name, err)
			}
		}
		check("(defaults)", cfg.Defaults)
		for name, sc := range cfg.Scenarios {
			check(name, sc)
		}
	})
}
