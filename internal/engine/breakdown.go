package engine

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/internal/distinct"
	"github.com/xk6-regime/xk6-regime/internal/latency"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// Request metrics the breakdown learns from. The latency metrics carry the
// status tag (errors); connecting and TLS times > 0 mark requests that
// opened a new connection (the client side of the connection-pool cold start).
const (
	httpReqConnectingMetric = "http_req_connecting"
	httpReqTLSMetric        = "http_req_tls_handshaking"
)

// breakdownKey identifies one cell of the request breakdown.
type breakdownKey struct {
	scenario, phase, regime, endpoint, proto string
}

// requestCell aggregates the requests of one cell.
type requestCell struct {
	count, errors, status5xx, noResponse int64
	hist                                 *latency.Histogram
	newConns                             int64
	connectMs, tlsMs                     float64
	firstNewConn, lastNewConn            time.Time
	first                                time.Time // its first request sample (addLatency: every request has one)
}

// breakdown holds per scenario x phase x regime x endpoint request figures
// (count, errors, latency distribution, new connections) and per-phase
// aggregates of tracked custom metrics (the service-side probe). It is fed
// by k6's metrics engine goroutine; mu guards everything.
type breakdown struct {
	mu      sync.Mutex
	cells   map[breakdownKey]*requestCell
	tracked map[string]map[string]*trackedCell // metric -> phase -> aggregate

	// maxEndpoints gives a scenario's cap on endpoint values (nil: the
	// default); endpoints holds the values admitted per scenario and over
	// what went to otherEndpoint beyond the cap.
	maxEndpoints func(scenario string) int
	endpoints    map[string]map[string]struct{}
	over         map[string]*endpointOverflow
	logger       logrus.FieldLogger
}

// otherEndpoint is the endpoint of the requests (and the detector of the
// endpoints) beyond a scenario's maxEndpoints; parenthesised like the
// "(setup)" and "(teardown)" rows.
const otherEndpoint = "(other)"

// maxOverflowValues bounds the distinct endpoint values counted beyond a
// cap, per scenario (8-byte hashes); beyond it the count is a lower bound.
const maxOverflowValues = 10_000

// endpointOverflow counts what went to otherEndpoint in one scenario.
type endpointOverflow struct {
	requests int64
	values   *distinct.Counter
}

// setMaxEndpoints installs the per-scenario cap (from regime.configure()).
func (b *breakdown) setMaxEndpoints(f func(scenario string) int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maxEndpoints = f
}

// setLogger sets where the first overflow of each scenario is reported.
func (b *breakdown) setLogger(l logrus.FieldLogger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.logger = l
}

// capEndpoint maps an endpoint beyond its scenario's cap to otherEndpoint
// and counts it (request: a latency sample, one request). Callers hold b.mu.
func (b *breakdown) capEndpoint(k *breakdownKey, request bool) (own bool) {
	set := b.endpoints[k.scenario]
	if _, ok := set[k.endpoint]; ok {
		return true
	}
	limit := defaultMaxEndpoints
	if b.maxEndpoints != nil {
		if l := b.maxEndpoints(k.scenario); l > 0 {
			limit = l
		}
	}
	if set == nil {
		set = map[string]struct{}{}
		b.endpoints[k.scenario] = set
	}
	if len(set) < limit {
		set[k.endpoint] = struct{}{}
		return true
	}
	o := b.over[k.scenario]
	if o == nil {
		o = &endpointOverflow{values: distinct.New(maxOverflowValues, 5)}
		b.over[k.scenario] = o
		if b.logger != nil {
			b.logger.Warnf("regime: scenario %s has more than %d endpoint values (tag 'endpoint', else k6's 'name', "+
				"which is the URL unless set); requests of further values are counted in the rows of endpoint %s. "+
				"Tag requests by endpoint, or raise maxEndpoints in regime.configure() (about 24 KiB per value, phase and regime)",
				k.scenario, limit, otherEndpoint)
		}
	}
	o.values.Add(k.endpoint)
	if request {
		o.requests++
	}
	k.endpoint = otherEndpoint
	return false
}

// endpointLimit reports what went beyond a scenario's cap (nil when nothing).
func (b *breakdown) endpointLimit(scenario string) *results.EndpointLimit {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.over[scenario]
	if o == nil {
		return nil
	}
	n, exact := o.values.Distinct()
	return &results.EndpointLimit{Values: n, ValuesExact: exact, Requests: o.requests, Examples: o.values.Examples()}
}

// trackedCell aggregates one tracked metric in one phase.
type trackedCell struct {
	kind           metrics.MetricType
	count          int64
	nonFinite      int64 // samples left out: ±Inf (or NaN)
	sum, last, max float64
	lastAt         time.Time
}

func newBreakdown() *breakdown {
	return &breakdown{cells: make(map[breakdownKey]*requestCell), tracked: make(map[string]map[string]*trackedCell),
		endpoints: make(map[string]map[string]struct{}), over: make(map[string]*endpointOverflow)}
}

// Scenario names of the request rows of setup() and teardown().
const (
	setupRow    = "(setup)"
	teardownRow = "(teardown)"
)

func keyOf(t *sampleTags, proto string) breakdownKey {
	return breakdownKey{proto: proto, scenario: t.row, phase: t.phase, regime: t.regime, endpoint: t.endpoint}
}

// cellOf returns the row of a request sample with tags t: the one kept in
// t once its endpoint has a row of its own (a tag set's row never changes
// then), else found by key and the endpoint cap (which counts the requests
// of endpoints beyond it). Callers hold b.mu.
func (b *breakdown) cellOf(t *sampleTags, proto string, request bool) *requestCell {
	i := 0
	if proto == "grpc" {
		i = 1
	}
	if c := t.cells[i]; c != nil {
		return c
	}
	k := keyOf(t, proto)
	own := b.capEndpoint(&k, request)
	c := b.cell(k)
	if own {
		t.cells[i] = c
	}
	return c
}

func (b *breakdown) cell(k breakdownKey) *requestCell {
	c := b.cells[k]
	if c == nil {
		c = &requestCell{hist: latency.New(600_000, 2)} // 1 µs .. 10 min, 2 significant digits
		b.cells[k] = c
	}
	return c
}

// phaseStarts is the time of each phase's first request sample, over its
// cells: the origin of its connections' times. Callers hold b.mu.
func (b *breakdown) phaseStarts() map[string]time.Time {
	out := map[string]time.Time{}
	for k, c := range b.cells {
		if c.first.IsZero() || k.scenario == setupRow || k.scenario == teardownRow {
			continue // not the load's: a phase starts with its scenarios' first request
		}
		if t, ok := out[k.phase]; !ok || c.first.Before(t) {
			out[k.phase] = c.first
		}
	}
	return out
}

// addLatency records one http_req_duration or grpc_req_duration sample.
func (b *breakdown) addLatency(s metrics.Sample, t *sampleTags, proto string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cellOf(t, proto, true)
	if c.first.IsZero() || s.Time.Before(c.first) {
		c.first = s.Time
	}
	c.count++
	c.hist.RecordMs(s.Value)
	if !t.failed(proto) {
		return
	}
	c.errors++
	if proto == "http" {
		switch {
		case t.code == 0:
			c.noResponse++ // connection refused, reset, EOF, timeout
		case t.code >= 500:
			c.status5xx++
		}
	} else if t.status == "14" { // UNAVAILABLE: the service's overload answer
		c.status5xx++
	}
}

// addConnect records the connecting or TLS time of an HTTP request; a
// positive value means the request opened a new connection.
func (b *breakdown) addConnect(s metrics.Sample, t *sampleTags, tls bool) {
	if s.Value <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cellOf(t, "http", false)
	if tls {
		c.tlsMs += s.Value
		return
	}
	c.newConns++
	c.connectMs += s.Value
	if c.firstNewConn.IsZero() || s.Time.Before(c.firstNewConn) {
		c.firstNewConn = s.Time
	}
	if s.Time.After(c.lastNewConn) {
		c.lastNewConn = s.Time
	}
}

// addTracked records a sample of a tracked custom metric by phase.
func (b *breakdown) addTracked(s metrics.Sample) {
	phase, _ := s.Tags.Get("phase")
	b.mu.Lock()
	defer b.mu.Unlock()
	byPhase := b.tracked[s.Metric.Name]
	if byPhase == nil {
		byPhase = make(map[string]*trackedCell)
		b.tracked[s.Metric.Name] = byPhase
	}
	c := byPhase[phase]
	if c == nil {
		c = &trackedCell{kind: s.Metric.Type}
		byPhase[phase] = c
	}
	if math.IsInf(s.Value, 0) || math.IsNaN(s.Value) {
		// k6 refuses NaN in metric.add(), not ±Inf (x/0); one would make
		// the sum, and summary.json, unwritable: counted apart instead
		c.nonFinite++
		return
	}
	if c.count == 0 || s.Value > c.max {
		c.max = s.Value
	}
	c.count++
	c.sum += s.Value
	if !s.Time.Before(c.lastAt) {
		c.last, c.lastAt = s.Value, s.Time
	}
}

// requestReports are the request breakdown's rows, in the order of every
// table of a run (results.CompareRequests).
func (b *breakdown) requestReports() []*requestReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := make([]breakdownKey, 0, len(b.cells))
	for k := range b.cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, c breakdownKey) int {
		return results.CompareRequests(a.scenario, a.phase, a.endpoint, a.proto, a.regime, c.scenario, c.phase, c.endpoint, c.proto, c.regime)
	})
	out := make([]*requestReport, 0, len(keys))
	starts := b.phaseStarts()
	for _, k := range keys {
		c := b.cells[k]
		row := &requestReport{
			Scenario: k.scenario, Phase: k.phase, Regime: k.regime, Endpoint: k.endpoint, Protocol: k.proto,
			Count: c.count, Errors: c.errors, Status5xx: c.status5xx, NoResponse: c.noResponse,
			NewConnections: c.newConns, ConnectMs: c.connectMs, TLSMs: c.tlsMs,
		}
		if c.count > 0 {
			row.ErrorRate = ptrTo(float64(c.errors) / float64(c.count))
			h := c.hist
			row.P50, row.P90, row.P95 = ptrTo(h.QuantileMs(50)), ptrTo(h.QuantileMs(90)), ptrTo(h.QuantileMs(95))
			row.P99, row.P999, row.Max = ptrTo(h.QuantileMs(99)), ptrTo(h.QuantileMs(99.9)), ptrTo(h.MaxMs)
		}
		if !c.lastNewConn.IsZero() {
			start, ok := starts[k.phase]
			if !ok || k.scenario == setupRow || k.scenario == teardownRow {
				start = c.first // setup() and teardown() from their own first request
			}
			row.LastNewConnectionMs = ptrTo(ms(c.lastNewConn.Sub(start)))
		}
		out = append(out, row)
	}
	return out
}

// connectionColdStart sums, per phase, the requests that opened a new
// connection: how many, the connect and TLS time they added, and when the
// last one happened (ms after the phase's first request).
func (b *breakdown) connectionColdStart() map[string]*results.ConnPhase {
	b.mu.Lock()
	defer b.mu.Unlock()
	phases := map[string]*results.ConnPhase{}
	starts := b.phaseStarts()
	for k, c := range b.cells {
		if k.scenario == setupRow || k.scenario == teardownRow {
			// setup() and teardown() run in VUs of their own, before and
			// after the load: their connections are no cold start of the
			// load's pool (their rows keep their counts)
			continue
		}
		p := phases[k.phase]
		if p == nil {
			p = &results.ConnPhase{}
			phases[k.phase] = p
		}
		cell := &results.ConnPhase{
			Requests: c.count, NewConnections: c.newConns, ConnectMs: c.connectMs, TLSMs: c.tlsMs,
			Errors: c.errors, Status5xx: c.status5xx, NoResponse: c.noResponse,
			NewConnectionsByRegime: map[string]int64{k.regime: c.newConns},
			ErrorsByRegime:         map[string]int64{k.regime: c.errors},
		}
		if !c.lastNewConn.IsZero() {
			last := ms(c.lastNewConn.Sub(starts[k.phase]))
			cell.LastNewConnectionMs = &last
		}
		p.Add(cell)
	}
	return phases
}

// trackedCells are the tracked metrics' figures per metric and phase.
func (b *breakdown) trackedCells() map[string]map[string]*results.TrackedCell {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]map[string]*results.TrackedCell{}
	for name, byPhase := range b.tracked {
		m := map[string]*results.TrackedCell{}
		for phase, c := range byPhase {
			m[phase] = &results.TrackedCell{Type: c.kind.String(), Count: c.count, Sum: c.sum, Last: c.last, Max: c.max, NonFinite: c.nonFinite}
		}
		out[name] = m
	}
	return out
}
