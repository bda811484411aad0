package results

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/latency"
)

// Run is a results folder in memory: the summary and what it is computed
// from (histograms), and the series.
type Run struct {
	Summary *Summary
	// Iter holds per scenario the iteration-duration distribution of each
	// regime (index: 0 cold, 1 warmup, 2 steady).
	Iter map[string]*[3]*latency.Histogram
	// Req holds the request distributions by RequestRow.Key().
	Req map[string]*latency.Histogram
	// Series holds per scenario the iteration series.
	Series map[string]*SeriesData
	// Windows holds the detectors' closed windows, in order of closing.
	Windows []WindowRow
}

// SeriesData is one scenario's iteration series.
type SeriesData struct {
	Points []SeriesPoint
	Info   IterSeriesInfo
}

// WindowRow is one closed detector window.
type WindowRow struct {
	Scenario     string
	Endpoint     string
	Seq          int
	FirstIndex   int64
	LastIndex    int64
	FirstMs      float64 // Unix ms
	LastMs       float64
	N            int
	Median       float64
	Tail         float64
	TailQuantile float64
	Drift        float64
	Stable       bool
	Regime       string
	Instance     int
	// Settled places the window against the settled view of its scope (the
	// endpoint's, else the scenario's) by the time of its first
	// observation: "steady" at or after the boundary, "transient" before
	// it, "none" when the view found no steady state, "" without a view.
	Settled string
}

// NewRun returns an empty run.
func NewRun() *Run {
	return &Run{
		Summary: &Summary{Schema: SchemaVersion, Instances: 1, Scenarios: map[string]*Scenario{},
			ConnectionColdStart: map[string]*ConnPhase{}, Warnings: []string{}},
		Iter: map[string]*[3]*latency.Histogram{}, Req: map[string]*latency.Histogram{}, Series: map[string]*SeriesData{},
	}
}

// Finalize computes the summary's distributions, rates and derived figures
// from the histograms, and names the files they are written to.
func (r *Run) Finalize() {
	s := r.Summary
	s.Schema = SchemaVersion
	if s.Instances == 0 {
		s.Instances = 1
	}
	if !s.Ended.IsZero() && !s.Started.IsZero() {
		s.DurationS = s.Ended.Sub(s.Started).Seconds()
	}
	if s.Warnings == nil {
		s.Warnings = []string{}
	}
	for name, sc := range s.Scenarios {
		if sc.Regimes == nil {
			sc.Regimes = map[string]*Dist{}
		}
		if hs := r.Iter[name]; hs != nil {
			finalizeScenario(name, sc, hs)
		}
	}
	r.finalizeRequests()
	s.Series.Windows = WindowsFile
	s.Series.Iterations = map[string]IterSeriesInfo{}
	for name, sd := range r.Series {
		sd.Info.File = filepath.Join(seriesDir, "iterations-"+fileSafe(name)+".csv")
		sd.Info.Points = len(sd.Points)
		s.Series.Iterations[name] = sd.Info
	}
}

// finalizeScenario fills a scenario's per-regime distributions from its
// iteration histograms (cold, warmup, steady), its iteration count, the
// cold-start cost (the cold iterations' total; the excess of cold and
// warm-up iterations over the steady mean) and the warm-up's duration.
func finalizeScenario(name string, sc *Scenario, hs *[3]*latency.Histogram) {
	var total int64
	for i, h := range hs {
		d := sc.Regimes[Regimes[i]]
		if d == nil {
			d = &Dist{}
			sc.Regimes[Regimes[i]] = d
		}
		if h == nil {
			continue
		}
		fill(h, d)
		total += d.Count
		d.HLog = filepath.Join(hdrDir, iterHLogName(name, Regimes[i]))
		d.Tag = iterTag(name, Regimes[i])
	}
	if sc.Iterations < total+sc.Untagged {
		sc.Iterations = total + sc.Untagged
	}
	if cold := hs[0]; cold != nil {
		sc.ColdStart.Iterations, sc.ColdStart.DurationMs = cold.Count, cold.SumMs
	}
	sc.ColdStart.ExcessMs = nil
	if st := hs[2]; st != nil && st.Count > 0 {
		// against the steady mean, not its median: a sum of durations
		// against a count times the median is skewed latency's mean-median
		// gap times the count, a cost a flat service never paid
		mean := st.SumMs / float64(st.Count)
		excess := 0.0
		for _, h := range hs[:2] {
			if h != nil {
				excess += h.SumMs - float64(h.Count)*mean
			}
		}
		sc.ColdStart.ExcessMs = &excess
	}
	sc.WarmupMs = nil
	if sc.ColdEnd != nil && sc.SteadyStart != nil {
		w := math.Max(0, sc.SteadyStart.ElapsedMs-sc.ColdEnd.ElapsedMs)
		sc.WarmupMs = &w
	}
}

// finalizeRequests fills each request row's distribution and error rate
// from its histogram (spanning its scenario's regime when known), and
// orders the rows by scenario, phase, endpoint, protocol and regime.
func (r *Run) finalizeRequests() {
	s := r.Summary
	for _, row := range s.Requests {
		h := r.Req[row.Key()]
		if h == nil {
			continue
		}
		if sc := s.Scenarios[row.Scenario]; sc != nil {
			if d := sc.Regimes[row.Regime]; d != nil && d.LastMs > d.FirstMs {
				h.FirstMs, h.LastMs = d.FirstMs, d.LastMs
			}
		}
		errs := row.Errors
		fill(h, &row.Dist)
		row.Errors = errs
		row.ErrorRate = 0
		if row.Count > 0 {
			row.ErrorRate = float64(row.Errors) / float64(row.Count)
		}
		row.HLog = RequestsHLogFile
		row.Tag = reqTag(row)
	}
	slices.SortStableFunc(s.Requests, func(a, b *RequestRow) int {
		return CompareRequests(a.Scenario, a.Phase, a.Endpoint, a.Protocol, a.Regime, b.Scenario, b.Phase, b.Endpoint, b.Protocol, b.Regime)
	})
}

// regimeRank orders regime names as the regimes go (unknown names last).
func regimeRank(r string) int { return int(regimeIndex(r)) }

func iterHLogName(scenario, regime string) string {
	return "iterations-" + fileSafe(scenario) + "-" + regime + ".hlog"
}

func iterTag(scenario, regime string) string { return escapeTag(scenario) + ";" + regime }

func reqTag(row *RequestRow) string {
	return strings.Join([]string{escapeTag(row.Scenario), escapeTag(row.Phase), escapeTag(row.Regime),
		escapeTag(row.Endpoint), escapeTag(row.Protocol)}, ";")
}

// WriteOptions say what WriteDir writes besides the data files.
type WriteOptions struct {
	Report bool // report.html
}

// WriteDir finalizes the run and writes its folder (created if needed):
// hdr/*.hlog, requests.hlog, series/*.csv, windows.csv, report.html when
// asked, and summary.json last.
func (r *Run) WriteDir(dir string, opt WriteOptions) error {
	r.Finalize()
	if err := os.MkdirAll(filepath.Join(dir, hdrDir), 0o755); err != nil { //nolint:gosec // a results folder users read
		return fmt.Errorf("results: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, seriesDir), 0o755); err != nil { //nolint:gosec
		return fmt.Errorf("results: %w", err)
	}
	s := r.Summary
	startMs := s.Started.UnixMilli()
	var errs []error
	for _, name := range s.SortedScenarios() {
		hs := r.Iter[name]
		if hs == nil {
			continue
		}
		for i, h := range hs {
			if h == nil {
				continue
			}
			d := s.Scenarios[name].Regimes[Regimes[i]]
			errs = append(errs, writeHLog(filepath.Join(dir, d.HLog),
				fmt.Sprintf("iteration_duration of scenario %s, regime %s", name, Regimes[i]), startMs,
				[]hlogEntry{{tag: d.Tag, startMs: spanStart(d, startMs), endMs: int64(d.LastMs), h: h.HDR}}))
		}
	}
	var entries []hlogEntry
	for _, row := range s.Requests {
		if h := r.Req[row.Key()]; h != nil {
			entries = append(entries, hlogEntry{tag: row.Tag, startMs: spanStart(&row.Dist, startMs), endMs: int64(row.LastMs), h: h.HDR})
		}
	}
	errs = append(errs, writeHLog(filepath.Join(dir, RequestsHLogFile),
		"request durations per scenario;phase;regime;endpoint;protocol (the Tag)", startMs, entries))
	for name, sd := range r.Series {
		var settled *Settled
		if sc := r.Summary.Scenarios[name]; sc != nil {
			settled = sc.Settled
		}
		errs = append(errs, writeSeries(filepath.Join(dir, sd.Info.File), name, sd, settled))
	}
	errs = append(errs, writeWindows(filepath.Join(dir, WindowsFile), r.Windows, r.Summary))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if opt.Report {
		if err := r.WriteReport(filepath.Join(dir, ReportFile)); err != nil {
			return err
		}
	}
	// last: a folder without summary.json is no results folder to any tool
	return writeSummary(dir, s, false)
}

// writeSummary writes summary.json into dir (through a temporary file and a
// rename when replace is set, for a folder readers may already see).
func writeSummary(dir string, s *Summary, replace bool) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	b = append(b, '\n')
	path := filepath.Join(dir, SummaryFile)
	if replace {
		err = ReplaceFile(path, func(f *os.File) error { _, err := f.Write(b); return err })
	} else {
		err = os.WriteFile(path, b, 0o644) //nolint:gosec // a results folder users read
	}
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// UpdateSummary rewrites summary.json (and report.html when it has one) of
// the run's existing folder dir after its Summary changed (how the run
// ended), each file replaced atomically.
func (r *Run) UpdateSummary(dir string, report bool) error {
	if err := writeSummary(dir, r.Summary, true); err != nil {
		return err
	}
	if report {
		return r.WriteReport(filepath.Join(dir, ReportFile))
	}
	return nil
}

func spanStart(d *Dist, fallback int64) int64 {
	if d.FirstMs > 0 {
		return int64(d.FirstMs)
	}
	return fallback
}

// WriteReport writes report.html, replacing the file at path atomically
// (ReplaceFile): a reader never sees half a report.
func (r *Run) WriteReport(path string) error {
	err := ReplaceFile(path, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 1<<16)
		err := r.Report(bw)
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("results: report: %w", err)
	}
	return nil
}

const seriesHeader = "index,n,end_ms,min_ms,median_ms,max_ms,regime"

func writeSeries(path, scenario string, sd *SeriesData, settled *Settled) error {
	f, err := os.Create(path) //nolint:gosec // the run folder
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	if sd.Info.Aggregated {
		fmt.Fprintf(bw, "# xk6-regime iteration series of scenario %s: %d iterations in %d buckets of up to %d; %s\n",
			scenario, sd.Info.Iterations, len(sd.Points), sd.Info.BucketWidth, sd.Info.Note)
	} else {
		fmt.Fprintf(bw, "# xk6-regime iteration series of scenario %s: every iteration (%d), in arrival order; end_ms is Unix ms\n",
			scenario, sd.Info.Iterations)
	}
	// the settled view beside the online tags of the regime column
	switch {
	case settled == nil:
	case settled.Steady && settled.Boundary != nil:
		fmt.Fprintf(bw, "# settled view (whole run): %s; steady state starts %.0f ms after the scenario start, after the first %d iterations by start time; the regime column holds the online tags\n",
			settled.Class, settled.Boundary.ElapsedMs, settled.Boundary.Index)
	default:
		fmt.Fprintf(bw, "# settled view (whole run): no steady state (%s); the regime column holds the online tags\n", settled.Reason)
	}
	bw.WriteString(seriesHeader + "\n")
	buf := make([]byte, 0, 128)
	for _, p := range sd.Points {
		buf = buf[:0]
		buf = strconv.AppendInt(buf, p.Index, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(p.N), 10)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, p.EndMs, 'f', 3, 64)
		for _, v := range [3]float32{p.Min, p.Med, p.Max} {
			buf = append(buf, ',')
			buf = strconv.AppendFloat(buf, float64(v), 'g', 7, 32)
		}
		buf = append(buf, ',')
		buf = append(buf, regimeName(p.Regime)...)
		buf = append(buf, '\n')
		bw.Write(buf)
	}
	err = bw.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func regimeName(r uint8) string {
	if int(r) < len(Regimes) {
		return Regimes[r]
	}
	return "untagged"
}

func regimeIndex(s string) uint8 {
	if r, ok := detector.LookupRegime(s); ok {
		return uint8(r)
	}
	return uint8(len(Regimes))
}

func readSeries(path string) ([]SeriesPoint, error) {
	f, err := os.Open(path) //nolint:gosec // a results folder
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	cr := csv.NewReader(f)
	cr.Comment = '#'
	cr.FieldsPerRecord = 7
	cr.ReuseRecord = true
	var out []SeriesPoint
	for line := 0; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if line == 0 && rec[0] == "index" {
			continue
		}
		var p SeriesPoint
		var perr error
		num := func(s string) float64 {
			v, e := strconv.ParseFloat(s, 64)
			if e != nil && perr == nil {
				perr = e
			}
			return v
		}
		p.Index = int64(num(rec[0]))
		p.N = int32(num(rec[1]))
		p.EndMs = num(rec[2])
		p.Min, p.Med, p.Max = float32(num(rec[3])), float32(num(rec[4])), float32(num(rec[5]))
		p.Regime = regimeIndex(rec[6])
		if perr != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, line+2, perr)
		}
		out = append(out, p)
	}
}

const windowsHeader = "scenario,endpoint,seq,first_index,last_index,first_ms,last_ms,n,median_ms,tail_ms,tail_quantile,drift,stable,regime,instance,settled"

// settledPlace is WindowRow.Settled for a window of scenario/endpoint that
// starts at firstMs.
func settledPlace(s *Summary, scenario, endpoint string, firstMs float64) string {
	if s == nil || s.Scenarios[scenario] == nil || s.Scenarios[scenario].Settled == nil {
		return ""
	}
	v := s.Scenarios[scenario].Settled
	if ev := v.Endpoints[endpoint]; endpoint != "" && ev != nil {
		v = ev
	}
	switch {
	case !v.Steady:
		return "none"
	case v.AtMs <= 0:
		return ""
	case firstMs >= v.AtMs:
		return "steady"
	}
	return "transient"
}

func writeWindows(path string, ws []WindowRow, s *Summary) error {
	f, err := os.Create(path) //nolint:gosec // the run folder
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	cw := csv.NewWriter(bw)
	_ = cw.Write(strings.Split(windowsHeader, ","))
	ff := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, w := range ws {
		_ = cw.Write([]string{w.Scenario, w.Endpoint, strconv.Itoa(w.Seq),
			strconv.FormatInt(w.FirstIndex, 10), strconv.FormatInt(w.LastIndex, 10),
			strconv.FormatFloat(w.FirstMs, 'f', 3, 64), strconv.FormatFloat(w.LastMs, 'f', 3, 64),
			strconv.Itoa(w.N), ff(w.Median), ff(w.Tail), ff(w.TailQuantile), ff(w.Drift),
			strconv.FormatBool(w.Stable), w.Regime, strconv.Itoa(w.Instance), settledPlace(s, w.Scenario, w.Endpoint, w.FirstMs)})
	}
	cw.Flush()
	err = errors.Join(cw.Error(), bw.Flush())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readWindows(path string) ([]WindowRow, error) {
	f, err := os.Open(path) //nolint:gosec // a results folder
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer func() { _ = f.Close() }()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1 // 15 columns before the settled one
	var out []WindowRow
	for line := 0; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if line == 0 {
			continue
		}
		if len(rec) != 15 && len(rec) != 16 {
			return nil, fmt.Errorf("%s: line %d: %d fields, want 16 (15 before the settled column)", path, line+1, len(rec))
		}
		var perr error
		num := func(s string) float64 {
			v, e := strconv.ParseFloat(s, 64)
			if e != nil && perr == nil {
				perr = e
			}
			return v
		}
		w := WindowRow{Scenario: rec[0], Endpoint: rec[1], Seq: int(num(rec[2])), FirstIndex: int64(num(rec[3])),
			LastIndex: int64(num(rec[4])), FirstMs: num(rec[5]), LastMs: num(rec[6]), N: int(num(rec[7])),
			Median: num(rec[8]), Tail: num(rec[9]), TailQuantile: num(rec[10]), Drift: num(rec[11]),
			Stable: rec[12] == "true", Regime: rec[13], Instance: int(num(rec[14]))}
		if len(rec) > 15 {
			w.Settled = rec[15]
		}
		if perr != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, line+1, perr)
		}
		out = append(out, w)
	}
}

// LoadDir reads a results folder back: the summary, its histograms and series.
func LoadDir(dir string) (*Run, error) {
	s, err := ReadSummary(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Summary: s, Iter: map[string]*[3]*latency.Histogram{}, Req: map[string]*latency.Histogram{}, Series: map[string]*SeriesData{}}
	if s.Scenarios == nil {
		s.Scenarios = map[string]*Scenario{}
	}
	if s.ConnectionColdStart == nil {
		s.ConnectionColdStart = map[string]*ConnPhase{}
	}
	for name, sc := range s.Scenarios {
		var hs [3]*latency.Histogram
		for i, rg := range Regimes {
			d := sc.Regimes[rg]
			if d == nil || d.HLog == "" {
				continue
			}
			h, err := findHLog(filepath.Join(dir, d.HLog), d.Tag, nil)
			if err != nil {
				return nil, err
			}
			hs[i] = histFromDist(h, d)
		}
		r.Iter[name] = &hs
	}
	if len(s.Requests) > 0 {
		all, err := readHLog(filepath.Join(dir, RequestsHLogFile))
		if err != nil {
			return nil, err
		}
		byTag := make(map[string]*hdrhistogram.Histogram, len(all))
		for _, h := range all {
			byTag[h.Tag()] = h
		}
		for _, row := range s.Requests {
			h := byTag[row.Tag]
			if h == nil {
				return nil, fmt.Errorf("%s: no histogram tagged %q (request row %s %s %s %s)",
					filepath.Join(dir, RequestsHLogFile), row.Tag, row.Scenario, row.Phase, row.Regime, row.Endpoint)
			}
			r.Req[row.Key()] = histFromDist(h, &row.Dist)
		}
	}
	for name, info := range s.Series.Iterations {
		pts, err := readSeries(filepath.Join(dir, info.File))
		if err != nil {
			return nil, err
		}
		r.Series[name] = &SeriesData{Points: pts, Info: info}
	}
	if r.Windows, err = readWindows(filepath.Join(dir, WindowsFile)); err != nil {
		return nil, err
	}
	return r, nil
}

func findHLog(path, tag string, _ *time.Time) (*hdrhistogram.Histogram, error) {
	hs, err := readHLog(path)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if tag == "" || h.Tag() == tag {
			return h, nil
		}
	}
	return nil, fmt.Errorf("%s: no histogram tagged %q", path, tag)
}

func sortStrings(s []string) { sort.Strings(s) }
