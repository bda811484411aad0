package results

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// UnitMs is the value of one HDR integer step in the histograms the results
// hold: values are recorded in microseconds.
const UnitMs = 0.001

// Hist is a latency distribution: an HDR histogram of integer microseconds,
// with the exact count, sum, min and max (ms) of what was recorded.
type Hist struct {
	H     *hdrhistogram.Histogram
	Count int64
	SumMs float64
	MinMs float64
	MaxMs float64
	// FirstMs and LastMs (Unix ms) bound the span of the recorded values
	// (first start, last end); 0 when unknown.
	FirstMs, LastMs float64
}

// NewHist returns an empty distribution of the HDR geometry of h (1 ..
// highest µs, sig significant digits).
func NewHist(highest int64, sig int) *Hist {
	return &Hist{H: hdrhistogram.New(1, highest, sig), MinMs: math.Inf(1), MaxMs: math.Inf(-1)}
}

// Quantile returns the value (ms) at quantile q (0..100), clamped to the exact
// min and max; 0 when empty.
func (h *Hist) Quantile(q float64) float64 {
	if h.Count == 0 || h.H == nil || h.H.TotalCount() == 0 {
		return 0
	}
	v := float64(h.H.ValueAtQuantile(q)) * UnitMs
	return math.Min(math.Max(v, h.MinMs), h.MaxMs)
}

// Merge adds o into h; HDR geometries may differ (values are re-recorded
// at their bucket's value when they do).
func (h *Hist) Merge(o *Hist) {
	if o == nil || o.Count == 0 {
		return
	}
	if h.H == nil {
		h.H = hdrhistogram.New(1, o.H.HighestTrackableValue(), int(o.H.SignificantFigures()))
	}
	h.H.Merge(o.H)
	if h.Count == 0 {
		h.MinMs, h.MaxMs = o.MinMs, o.MaxMs
	} else {
		h.MinMs, h.MaxMs = math.Min(h.MinMs, o.MinMs), math.Max(h.MaxMs, o.MaxMs)
	}
	h.Count += o.Count
	h.SumMs += o.SumMs
	h.FirstMs = minNonZero(h.FirstMs, o.FirstMs)
	h.LastMs = math.Max(h.LastMs, o.LastMs)
}

func minNonZero(a, b float64) float64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return math.Min(a, b)
}

// fill sets d's statistics from h (keeping d's Errors, HLog and Tag).
func (h *Hist) fill(d *Dist) {
	d.Count, d.SumMs = h.Count, h.SumMs
	d.FirstMs, d.LastMs = h.FirstMs, h.LastMs
	d.SpanMs, d.Rate = 0, 0
	if h.LastMs > h.FirstMs {
		d.SpanMs = h.LastMs - h.FirstMs
		d.Rate = float64(h.Count) / (d.SpanMs / 1000)
	}
	if h.Count == 0 {
		d.Min, d.Mean, d.P50, d.P90, d.P95, d.P99, d.P999, d.Max = 0, 0, 0, 0, 0, 0, 0, 0
		return
	}
	d.Min, d.Max = h.MinMs, h.MaxMs
	d.Mean = h.SumMs / float64(h.Count)
	d.P50, d.P90, d.P95 = h.Quantile(50), h.Quantile(90), h.Quantile(95)
	d.P99, d.P999 = h.Quantile(99), h.Quantile(99.9)
}

// histFromDist rebuilds a Hist from an HDR histogram read from a log and
// the exact figures of summary.json.
func histFromDist(h *hdrhistogram.Histogram, d *Dist) *Hist {
	out := &Hist{H: h, Count: d.Count, SumMs: d.SumMs, MinMs: d.Min, MaxMs: d.Max, FirstMs: d.FirstMs, LastMs: d.LastMs}
	if d.Count == 0 {
		out.MinMs, out.MaxMs = math.Inf(1), math.Inf(-1)
	}
	return out
}

// hlogEntry is one histogram of an .hlog file.
type hlogEntry struct {
	tag            string
	startMs, endMs int64
	h              *hdrhistogram.Histogram
}

// writeHLog writes histograms in the HdrHistogram log format (v1.3), with
// absolute timestamps, one interval per entry.
func writeHLog(path, comment string, startMs int64, entries []hlogEntry) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // a results folder users read
		return err
	}
	f, err := os.Create(path) //nolint:gosec // the run folder
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	lw := hdrhistogram.NewHistogramLogWriter(bw)
	err = errors.Join(
		lw.OutputLogFormatVersion(),
		lw.OutputComment("[xk6-regime: "+comment+"; values in microseconds; Interval_Max in seconds]"),
		lw.OutputStartTime(startMs),
		lw.OutputLegend(),
	)
	for _, e := range entries {
		if err != nil {
			break
		}
		if strings.ContainsAny(e.tag, ", \r\n") {
			err = fmt.Errorf("hlog tag %q contains a comma, space or line break", e.tag)
			break
		}
		e.h.SetTag(e.tag)
		e.h.SetStartTimeMs(e.startMs)
		e.h.SetEndTimeMs(max(e.endMs, e.startMs))
		err = lw.OutputIntervalHistogram(e.h)
		e.h.SetTag("")
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readHLog reads every interval histogram of an .hlog file.
func readHLog(path string) ([]*hdrhistogram.Histogram, error) {
	f, err := os.Open(path) //nolint:gosec // a results folder
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readHLogFrom(f, path)
}

func readHLogFrom(r io.Reader, name string) ([]*hdrhistogram.Histogram, error) {
	lr := hdrhistogram.NewHistogramLogReader(r)
	var out []*hdrhistogram.Histogram
	for {
		h, err := lr.NextIntervalHistogram()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if h == nil {
			return out, nil
		}
		out = append(out, h)
	}
}

// escapeTag makes s usable in an hlog tag (no comma, space, line break, '=' or '%').
func escapeTag(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == ',' || c == '%' || c == '=' || c == '/' || c >= 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// fileSafe makes s usable as a file name part.
func fileSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
