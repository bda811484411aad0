package demo

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// metricsContentType is the Prometheus text exposition format.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// latencyBuckets are the upper bounds (seconds) of every latency histogram.
var latencyBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// histogram has a fixed shape: recording is a bucket search and two adds.
type histogram struct {
	counts [len(latencyBuckets) + 1]uint64 // the last one is +Inf
	sum    float64
	count  uint64
}

func (h *histogram) observe(seconds float64) {
	i, _ := slices.BinarySearch(latencyBuckets[:], seconds)
	h.counts[i]++
	h.sum += seconds
	h.count++
}

// requestKey identifies a request series. For HTTP, op is the route pattern
// ("/api/players/{id}/goals/initialize"); for gRPC, the full method name.
type requestKey struct {
	method string // HTTP method; "" for gRPC
	op     string
	code   string
}

type opKey struct{ method, op string }

// requestMetrics counts requests by operation and status and keeps a latency
// histogram per operation. One mutex: a few hundred requests a second cost
// nothing here, and counts and histograms change together.
type requestMetrics struct {
	mu     sync.Mutex
	counts map[requestKey]uint64
	hists  map[opKey]*histogram
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{counts: make(map[requestKey]uint64), hists: make(map[opKey]*histogram)}
}

func (m *requestMetrics) observe(method, op, code string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts[requestKey{method, op, code}]++
	k := opKey{method, op}
	h := m.hists[k]
	if h == nil {
		h = new(histogram)
		m.hists[k] = h
	}
	h.observe(d.Seconds())
}

type requestSnapshot struct {
	counts []requestCount
	hists  []opHistogram
}

type requestCount struct {
	requestKey
	n uint64
}

type opHistogram struct {
	opKey
	h histogram
}

func (m *requestMetrics) snapshot() requestSnapshot {
	m.mu.Lock()
	var s requestSnapshot
	for k, n := range m.counts {
		s.counts = append(s.counts, requestCount{k, n})
	}
	for k, h := range m.hists {
		s.hists = append(s.hists, opHistogram{k, *h})
	}
	m.mu.Unlock()
	slices.SortFunc(s.counts, func(a, b requestCount) int {
		return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.method, b.method), cmp.Compare(a.code, b.code))
	})
	slices.SortFunc(s.hists, func(a, b opHistogram) int {
		return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.method, b.method))
	})
	return s
}

// metricsSource is everything /metrics reports.
type metricsSource struct {
	db    database
	store *store
	http  *requestMetrics
	grpc  *requestMetrics
}

// writeMetrics writes every metric in the Prometheus text format.
func writeMetrics(w io.Writer, src metricsSource) error {
	e := expo{w: newBufWriter(w)}

	e.family("demo_database_info", "gauge", "Database backend in use (simulated or postgres).")
	e.sample("demo_database_info", 1, "backend", src.db.kind())

	ps := src.db.poolStat()
	gauges := []struct {
		name, help string
		v          int64
	}{
		{"demo_db_pool_max_conns", "Most connections the pool may open.", ps.MaxConns},
		{"demo_db_pool_total_conns", "Open connections (pool size), idle or in use.", ps.TotalConns},
		{"demo_db_pool_idle_conns", "Open connections not in use.", ps.IdleConns},
		{"demo_db_pool_in_use_conns", "Connections acquired by a request.", ps.AcquiredConns},
		{"demo_db_pool_constructing_conns", "Connections being opened.", ps.ConstructingConns},
	}
	for _, g := range gauges {
		e.family(g.name, "gauge", g.help)
		e.sample(g.name, float64(g.v))
	}
	counters := []struct {
		name, help string
		v          float64
	}{
		{"demo_db_pool_acquires_total", "Successful connection acquires.", float64(ps.Acquires)},
		{"demo_db_pool_waited_acquires_total", "Successful acquires that found no idle connection and waited.", float64(ps.WaitedAcquires)},
		{"demo_db_pool_acquire_wait_seconds_total", "Time successful acquires spent acquiring.", ps.AcquireWait.Seconds()},
		{"demo_db_pool_acquire_timeouts_total", "Acquires that gave up after the acquire timeout (answered 503 / UNAVAILABLE).", float64(ps.AcquireTimeouts)},
		{"demo_db_pool_acquire_errors_total", "Acquires that failed otherwise (canceled, connection refused).", float64(ps.AcquireErrors)},
		{"demo_db_pool_new_conns_total", "Connections opened.", float64(ps.NewConns)},
		{"demo_db_pool_conn_setup_seconds_total", "Time spent opening connections.", ps.ConnSetup.Seconds()},
	}
	for _, c := range counters {
		e.family(c.name, "counter", c.help)
		e.sample(c.name, c.v)
	}

	caches := src.store.cacheStats()
	names := make([]string, 0, len(caches))
	for n := range caches {
		names = append(names, n)
	}
	slices.Sort(names)
	e.family("demo_cache_hits_total", "counter", "Cache lookups answered from the cache.")
	for _, n := range names {
		e.sample("demo_cache_hits_total", float64(caches[n].Hits), "cache", n)
	}
	e.family("demo_cache_misses_total", "counter", "Cache lookups that missed (each costs a database query).")
	for _, n := range names {
		e.sample("demo_cache_misses_total", float64(caches[n].Misses), "cache", n)
	}
	e.family("demo_cache_entries", "gauge", "Entries in the cache.")
	for _, n := range names {
		e.sample("demo_cache_entries", float64(caches[n].Entries), "cache", n)
	}

	hs := src.http.snapshot()
	e.family("demo_http_requests_total", "counter", "HTTP requests by method, route and status code.")
	for _, c := range hs.counts {
		e.sample("demo_http_requests_total", float64(c.n), "method", c.method, "route", c.op, "code", c.code)
	}
	e.family("demo_http_request_duration_seconds", "histogram", "HTTP request latency by method and route.")
	for _, h := range hs.hists {
		e.histogram("demo_http_request_duration_seconds", &h.h, "method", h.method, "route", h.op)
	}

	gs := src.grpc.snapshot()
	e.family("demo_grpc_requests_total", "counter", "gRPC calls by full method name and status code.")
	for _, c := range gs.counts {
		e.sample("demo_grpc_requests_total", float64(c.n), "method", c.op, "code", c.code)
	}
	e.family("demo_grpc_request_duration_seconds", "histogram", "gRPC call latency by full method name.")
	for _, h := range gs.hists {
		e.histogram("demo_grpc_request_duration_seconds", &h.h, "method", h.op)
	}
	return e.flush()
}

// expo writes the text exposition format; the first write error sticks.
type expo struct {
	w   *bufio.Writer
	buf []byte
}

func (e *expo) family(name, typ, help string) {
	e.w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

func (e *expo) sample(name string, v float64, labels ...string) {
	b := append(e.buf[:0], name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, '=', '"')
			b = append(b, labelEscaper.Replace(labels[i+1])...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	b = append(b, '\n')
	e.buf = b
	e.w.Write(b)
}

func (e *expo) histogram(name string, h *histogram, labels ...string) {
	var cum uint64
	for i, ub := range latencyBuckets {
		cum += h.counts[i]
		e.sample(name+"_bucket", float64(cum), append(labels, "le", strconv.FormatFloat(ub, 'g', -1, 64))...)
	}
	e.sample(name+"_bucket", float64(h.count), append(labels, "le", "+Inf")...)
	e.sample(name+"_sum", h.sum, labels...)
	e.sample(name+"_count", float64(h.count), labels...)
}

func (e *expo) flush() error { return e.w.Flush() }

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func newBufWriter(w io.Writer) *bufio.Writer { return bufio.NewWriter(w) }
