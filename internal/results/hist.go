package results

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xk6-regime/xk6-regime/internal/latency"
)

// fill sets d's statistics from h (keeping d's Errors, HLog and Tag).
func fill(h *latency.Histogram, d *Dist) {
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
	d.P50, d.P90, d.P95 = h.QuantileMs(50), h.QuantileMs(90), h.QuantileMs(95)
	d.P99, d.P999 = h.QuantileMs(99), h.QuantileMs(99.9)
}

// histFromDist rebuilds a latency histogram from an HDR histogram read
// from a log and the exact figures of summary.json.
func histFromDist(h *hdrhistogram.Histogram, d *Dist) *latency.Histogram {
	out := latency.FromHDR(h, d.Count, d.SumMs, d.Min, d.Max)
	out.FirstMs, out.LastMs = d.FirstMs, d.LastMs
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
