package results

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// jsonNames lists the JSON names of a struct type's fields, those of
// embedded structs in place (what encoding/json writes when every field is
// set).
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func fullDist() Dist {
	return Dist{Count: 3, SumMs: 6, Min: 1, Mean: 2, P50: 2, P90: 2.5, P95: 2.7, P99: 2.9, P999: 2.99, Max: 3,
		Rate: 1.5, SpanMs: 2000, FirstMs: 1e12, LastMs: 1e12 + 2000, Errors: 1, HLog: "hdr/x.hlog", Tag: "t"}
}

// TestEmptyDistFiguresAreNull: summary.json writes the figures of a regime
// with no iteration (and of a request cell with no request) as null, as
// regime.summary() does, never as 0 ms. A script reading
// scenarios.x.regimes.steady.p99 of a run that never reached steady state
// must not read a latency of 0.
func TestEmptyDistFiguresAreNull(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(map[string]*Dist{"steady": {Rate: 0, Errors: 0}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"min", "mean", "p50", "p90", "p95", "p99", "p99_9", "max"} {
		v, ok := m["steady"][k]
		if !ok || v != nil {
			t.Errorf("empty regime: %s = %v (present %v), want null", k, v, ok)
		}
	}
	if m["steady"]["count"] != 0.0 {
		t.Errorf("empty regime: count = %v, want 0", m["steady"]["count"])
	}

	row := RequestRow{Scenario: "s", Phase: "p", Regime: "steady", Endpoint: "GET /", Protocol: "http"}
	b, err = json.Marshal(&row)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if v, ok := r["p99"]; !ok || v != nil {
		t.Errorf("empty request row: p99 = %v (present %v), want null", v, ok)
	}
	if r["scenario"] != "s" || r["endpoint"] != "GET /" {
		t.Errorf("empty request row lost its own fields: %s", b)
	}
	var back RequestRow
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, row) {
		t.Errorf("empty request row read back as %+v, want %+v", back, row)
	}
}

// TestDistJSONKeepsEveryField: the marshallers of Dist and RequestRow write
// every field their structs declare (a field added to either and not to
// distJSON or requestRowJSON fails here), and read back equal.
func TestDistJSONKeepsEveryField(t *testing.T) {
	t.Parallel()
	lastConn := 12.5
	row := RequestRow{Scenario: "s", Phase: "p", Regime: "steady", Endpoint: "GET /", Protocol: "http",
		Dist: fullDist(), ErrorRate: 0.25, Status5xx: 1, NoResponse: 2, NewConnections: 3, ConnectMs: 4, TLSMs: 5,
		LastNewConnectionMs: &lastConn}
	for _, c := range []struct {
		name string
		v    any
		back any
		typ  reflect.Type
	}{
		{"Dist", func() *Dist { d := fullDist(); return &d }(), new(Dist), reflect.TypeFor[Dist]()},
		{"RequestRow", &row, new(RequestRow), reflect.TypeFor[RequestRow]()},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		got := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		want := jsonNames(c.typ)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: written keys %v, declared %v", c.name, got, want)
		}
		if err := json.Unmarshal(b, c.back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.back, c.v) {
			t.Errorf("%s read back as %+v, want %+v", c.name, c.back, c.v)
		}
	}
}
