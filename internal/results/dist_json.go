package results

import "encoding/json"

// distJSON is Dist as summary.json writes it: the figures of a distribution
// with no observation (a regime never reached, a request cell with no
// request) are null, as regime.summary() writes them, never a 0 that a
// script reading summary.json would take for a latency of 0 ms. Reading a
// null back leaves the Go field at 0 (encoding/json), and Count says there
// was nothing.
type distJSON struct {
	Count   int64    `json:"count"`
	SumMs   float64  `json:"sum_ms"`
	Min     *float64 `json:"min"`
	Mean    *float64 `json:"mean"`
	P50     *float64 `json:"p50"`
	P90     *float64 `json:"p90"`
	P95     *float64 `json:"p95"`
	P99     *float64 `json:"p99"`
	P999    *float64 `json:"p99_9"`
	Max     *float64 `json:"max"`
	Rate    float64  `json:"rate"`
	SpanMs  float64  `json:"span_ms"`
	FirstMs float64  `json:"first_ms,omitempty"`
	LastMs  float64  `json:"last_ms,omitempty"`
	Errors  int64    `json:"errors"`
	HLog    string   `json:"hlog,omitempty"`
	Tag     string   `json:"hdr_tag,omitempty"`
}

func (d *Dist) toJSON() distJSON {
	fig := func(v float64) *float64 {
		if d.Count == 0 {
			return nil
		}
		return &v
	}
	return distJSON{Count: d.Count, SumMs: d.SumMs, Min: fig(d.Min), Mean: fig(d.Mean), P50: fig(d.P50),
		P90: fig(d.P90), P95: fig(d.P95), P99: fig(d.P99), P999: fig(d.P999), Max: fig(d.Max),
		Rate: d.Rate, SpanMs: d.SpanMs, FirstMs: d.FirstMs, LastMs: d.LastMs, Errors: d.Errors, HLog: d.HLog, Tag: d.Tag}
}

// MarshalJSON writes the figures of an empty distribution as null (distJSON).
func (d Dist) MarshalJSON() ([]byte, error) { return json.Marshal(d.toJSON()) }

// requestRowJSON is RequestRow as summary.json writes it: its Dist as
// distJSON (RequestRow embeds Dist, whose MarshalJSON would otherwise stand
// for the whole row and drop the row's own fields).
type requestRowJSON struct {
	Scenario string `json:"scenario"`
	Phase    string `json:"phase"`
	Regime   string `json:"regime"`
	Endpoint string `json:"endpoint"`
	Protocol string `json:"protocol"`
	distJSON
	ErrorRate           float64  `json:"error_rate"`
	Status5xx           int64    `json:"status_5xx"`
	NoResponse          int64    `json:"no_response"`
	NewConnections      int64    `json:"new_connections"`
	ConnectMs           float64  `json:"connect_ms"`
	TLSMs               float64  `json:"tls_ms"`
	LastNewConnectionMs *float64 `json:"last_new_connection_ms"`
}

// MarshalJSON writes the row with the figures of an empty cell as null.
func (r RequestRow) MarshalJSON() ([]byte, error) {
	return json.Marshal(requestRowJSON{Scenario: r.Scenario, Phase: r.Phase, Regime: r.Regime, Endpoint: r.Endpoint,
		Protocol: r.Protocol, distJSON: r.Dist.toJSON(), ErrorRate: r.ErrorRate, Status5xx: r.Status5xx,
		NoResponse: r.NoResponse, NewConnections: r.NewConnections, ConnectMs: r.ConnectMs, TLSMs: r.TLSMs,
		LastNewConnectionMs: r.LastNewConnectionMs})
}
