package engine

import (
	"strconv"
	"sync"
	"sync/atomic"

	"go.k6.io/k6/v2/metrics"
)

// sampleTags are the tag values the extension reads from a sample. k6
// interns tag sets (one *metrics.TagSet per combination of tags, shared by
// every sample that carries it), and reading one tag walks the set's tree
// with string comparisons, so the values are read once per set and kept
// in a tagCache, not read again for every sample (about eight reads per
// request sample before).
type sampleTags struct {
	tagValues
	// st is the scenario's state, found on the first sample (scenario
	// states live as long as the run)
	st atomic.Pointer[Scenario]
	// cells are the breakdown's rows of this tag set's http and grpc
	// requests, once known (breakdown.cellOf; guarded by the breakdown's mu)
	cells [2]*requestCell
}

// tagValues are the values of a sampleTags.
type tagValues struct {
	scenario, phase, regime, status string
	hasScenario, hasRegime          bool
	// endpoint is the breakdown's endpoint: the endpoint tag, else k6's
	// name; endpointTag the endpoint tag alone (the detectors' default)
	endpoint, endpointTag string
	// row is the breakdown's scenario: the scenario, or the setup and
	// teardown rows for requests made outside every scenario
	row string
	// code is the status as a number (0 when it is not one)
	code int
}

func readSampleTags(ts *metrics.TagSet) *sampleTags {
	t := &sampleTags{}
	t.scenario, t.hasScenario = ts.Get(scenarioTag)
	t.row = t.scenario
	if t.row == "" {
		// setup() and teardown() run outside every scenario; k6 marks
		// them with a group (scenario names cannot hold parentheses)
		switch g, _ := ts.Get("group"); g {
		case "::setup":
			t.row = setupRow
		case "::teardown":
			t.row = teardownRow
		}
	}
	t.phase, _ = ts.Get("phase")
	t.regime, t.hasRegime = ts.Get(RegimeTag)
	t.endpointTag, _ = ts.Get("endpoint")
	t.endpoint = t.endpointTag
	if t.endpoint == "" {
		t.endpoint, _ = ts.Get("name")
	}
	t.status, _ = ts.Get("status")
	t.code, _ = strconv.Atoi(t.status)
	return t
}

// failed reports whether a request sample of proto ("http" or "grpc")
// failed: an HTTP status of 0 (no response) or >= 400, a gRPC status other
// than OK. The one rule for the breakdown's errors and the settled view's
// error rate.
func (t *sampleTags) failed(proto string) bool {
	if proto == "http" {
		return t.code == 0 || t.code >= 400
	}
	return t.status != "" && t.status != "0"
}

// tagCacheMax bounds the tag sets a tagCache holds (about 200 bytes
// each); past it the cache starts over, so a test whose every request
// carries a tag value of its own (a URL as its name) costs memory no more
// than a fixed amount, and only the reads the cache would have saved.
const tagCacheMax = 4096

// tagCache maps tag sets to their values. Safe for concurrent use; a hit
// takes no lock (a sync.Map: its keys are written once and read for the
// rest of the run, the case it is made for; a mutex here was a fifth of the
// per-sample cost).
type tagCache struct {
	m sync.Map // *metrics.TagSet -> *sampleTags
	n atomic.Int64
}

func (c *tagCache) get(ts *metrics.TagSet) *sampleTags {
	if v, ok := c.m.Load(ts); ok {
		return v.(*sampleTags) //nolint:forcetypeassert // only *sampleTags are stored
	}
	t := readSampleTags(ts)
	if v, loaded := c.m.LoadOrStore(ts, t); loaded {
		return v.(*sampleTags) //nolint:forcetypeassert // only *sampleTags are stored
	}
	if c.n.Add(1) > tagCacheMax {
		// start over (writers racing here may leave a few more entries
		// than counted, never an unbounded number)
		c.m.Clear()
		c.n.Store(0)
	}
	return t
}
