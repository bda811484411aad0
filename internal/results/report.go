package results

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

//go:embed report.js
var reportJS string

//go:embed report.css
var reportCSS string

// reportPointLimit bounds the points per scenario embedded in report.html
// (the plot is about a thousand pixels wide; the series files keep more).
const reportPointLimit = 4000

// reportData is what report.js draws.
type reportData struct {
	RunID     string           `json:"run_id"`
	StartMs   float64          `json:"start_ms"`
	Scenarios []reportScenario `json:"scenarios"`
}

type reportScenario struct {
	Name        string         `json:"name"`
	Class       string         `json:"class"`
	TTSSMs      *float64       `json:"ttss_ms"`
	Iterations  int64          `json:"iterations"`
	Aggregated  bool           `json:"aggregated"`
	BucketWidth int            `json:"bucket_width"`
	Points      [][7]float64   `json:"points"` // index, n, end ms, min, median, max, regime
	Regions     []Region       `json:"regions"`
	Transitions []reportTrans  `json:"transitions"`
	Windows     []reportWindow `json:"windows"`
}

type reportTrans struct {
	Kind     string  `json:"kind"`
	To       string  `json:"to"`
	Endpoint string  `json:"endpoint,omitempty"`
	AtMs     float64 `json:"at_ms"`
	Index    *int64  `json:"index"` // iteration index when known
}

type reportWindow struct {
	Endpoint string  `json:"endpoint,omitempty"`
	Index    *int64  `json:"index"` // last iteration index when the window counts iterations
	FirstIdx *int64  `json:"first_index"`
	FirstMs  float64 `json:"first_ms"`
	LastMs   float64 `json:"last_ms"`
	Median   float64 `json:"median"`
	Tail     float64 `json:"tail"`
}

// Report writes the self-contained HTML report (inline CSS, JS and data:
// it works offline).
func (r *Run) Report(w io.Writer) error {
	s := r.Summary
	data := reportData{RunID: s.RunID}
	if !s.Started.IsZero() {
		data.StartMs = float64(s.Started.UnixNano()) / 1e6
	}
	for _, name := range s.SortedScenarios() {
		data.Scenarios = append(data.Scenarios, r.reportScenario(name, data.StartMs))
	}
	js, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var b strings.Builder
	writeReportHead(&b, s)
	b.WriteString("<div id=\"plots\"></div>\n")
	writeRegimeTable(&b, s)
	writeSettledTable(&b, s)
	writeColdStart(&b, s)
	writeRequests(&b, s)
	writeEnvironment(&b, s)
	b.WriteString("<script type=\"application/json\" id=\"regime-data\">")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	_, err = io.WriteString(w, "</script>\n<script>"+reportJS+"</script>\n</body></html>\n")
	return err
}

// reportScenario is what report.js draws of one scenario: its series
// (downsampled to reportPointLimit points), regions, transitions (the
// settled boundary among them) and windows. startMs is the run's start
// (Unix ms; 0 when unknown).
func (r *Run) reportScenario(name string, startMs float64) reportScenario {
	sc := r.Summary.Scenarios[name]
	rs := reportScenario{Name: name, Class: sc.Class, TTSSMs: sc.TTSSMs, Iterations: sc.Iterations,
		Points: [][7]float64{}, Regions: []Region{}, Transitions: []reportTrans{}, Windows: []reportWindow{}}
	iterIndexed := sc.Input == "" || sc.Input == "iteration"
	if sd := r.Series[name]; sd != nil {
		rs.Aggregated, rs.BucketWidth = sd.Info.Aggregated, sd.Info.BucketWidth
		rs.Regions = Regions(sd.Points)
		pts := sd.Points
		if len(pts) > reportPointLimit {
			pts, _ = rebound(append([]SeriesPoint(nil), pts...), reportPointLimit)
			rs.Aggregated = true
		}
		rs.Points = make([][7]float64, len(pts))
		for i, p := range pts {
			rs.Points[i] = [7]float64{float64(p.Index), float64(p.N), round3(p.EndMs), r32(p.Min), r32(p.Med), r32(p.Max), float64(p.Regime)}
		}
	}
	rs.Transitions = reportTransitions(sc, startMs, iterIndexed)
	for _, wr := range r.Windows {
		if wr.Scenario != name {
			continue
		}
		rw := reportWindow{Endpoint: wr.Endpoint, FirstMs: round3(wr.FirstMs), LastMs: round3(wr.LastMs), Median: wr.Median, Tail: wr.Tail}
		if wr.Endpoint == "" && iterIndexed && wr.Instance == 0 {
			a, b := wr.FirstIndex, wr.LastIndex
			rw.FirstIdx, rw.Index = &a, &b
		}
		rs.Windows = append(rs.Windows, rw)
	}
	return rs
}

// reportTransitions lists the scenario's online transitions, then the
// settled boundary (drawn beside them); iteration indexes only where the
// series counts iterations.
func reportTransitions(sc *Scenario, startMs float64, iterIndexed bool) []reportTrans {
	out := []reportTrans{}
	for _, t := range sc.Transitions {
		rt := reportTrans{Kind: t.Kind, To: t.To, Endpoint: t.Endpoint, AtMs: t.AtMs}
		if t.Endpoint == "" && iterIndexed {
			i := t.Index
			rt.Index = &i
		}
		if rt.AtMs == 0 && startMs > 0 {
			rt.AtMs = startMs + t.ElapsedMs
		}
		out = append(out, rt)
	}
	if v := sc.Settled; v != nil && v.Steady && v.Boundary != nil {
		rt := reportTrans{Kind: "settled", To: "steady (settled)"}
		switch {
		case v.AtMs > 0:
			rt.AtMs = v.AtMs
		case startMs > 0: // a summary from before at_ms: from the run's start
			rt.AtMs = startMs + v.Boundary.ElapsedMs
		}
		if iterIndexed {
			i := v.Boundary.Index
			rt.Index = &i
		}
		out = append(out, rt)
	}
	return out
}

// writeReportHead writes the report's head, title line, how the run ended,
// its warnings and the plots' legend.
func writeReportHead(b *strings.Builder, s *Summary) {
	esc := html.EscapeString
	title := "xk6-regime report " + s.RunID
	fmt.Fprintf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>\n<style>%s</style></head><body>\n", esc(title), reportCSS)
	fmt.Fprintf(b, "<h1>%s</h1>\n<p class=\"meta\">started %s, %.1f s", esc(title), esc(fmtTime(s.Started)), s.DurationS)
	if s.TestID != "" {
		fmt.Fprintf(b, ", testid %s", esc(s.TestID))
	}
	if s.Instances > 1 {
		fmt.Fprintf(b, ", merged from %d k6 instances", s.Instances)
	}
	b.WriteString("</p>\n")
	class := "end"
	if !s.Completed() {
		class += " end-incomplete"
	}
	fmt.Fprintf(b, "<p class=\"%s\" id=\"run-end\"><b>Run ended:</b> %s</p>\n", class, esc(s.EndText()))
	warnings := append(append([]string(nil), s.Environment.Warnings...), s.Warnings...)
	for _, e := range s.InstanceEnvironments {
		warnings = append(warnings, e.Warnings...)
	}
	if len(warnings) > 0 {
		b.WriteString("<div class=\"warnings\" id=\"warnings\"><b>Warnings</b><ul>")
		for _, w := range dedupe(warnings) {
			fmt.Fprintf(b, "<li>%s</li>", esc(w))
		}
		b.WriteString("</ul></div>\n")
	}
	b.WriteString(`<p class="legend"><span class="sw cold"></span>cold <span class="sw warmup"></span>warm-up <span class="sw steady"></span>steady <span class="sw data"></span>iteration duration (min-max per pixel column) <span class="sw med"></span>median <span class="sw wmed"></span>window median <span class="sw wtail"></span>window tail <span class="sw tr"></span>transition (decided) <span class="sw str"></span>settled steady-state start (whole run)</p>` + "\n")
}

func r32(v float32) float64 { return round3(float64(v)) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func fmtMs(p *float64, digits int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.*f", digits, *p)
}

func writeRegimeTable(b *strings.Builder, s *Summary) {
	b.WriteString("<h2>Regimes per scenario</h2>\n<table id=\"regimes\"><tr><th>scenario</th><th>class</th><th>TTSS ms</th><th>warm-up ms</th><th>relapses</th><th title=\"held: reached and held to the end; not-held: reached, then lost (a relapse, a drift, too short a part of the run); never-reached\">steady state</th><th>regime</th><th>count</th><th>rate/s</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th></tr>\n")
	for _, name := range s.SortedScenarios() {
		sc := s.Scenarios[name]
		for i, rg := range Regimes {
			d := sc.Regimes[rg]
			if d == nil {
				d = &Dist{}
			}
			b.WriteString("<tr>")
			if i == 0 {
				fmt.Fprintf(b, "<td rowspan=3>%s</td><td rowspan=3>%s</td><td rowspan=3>%s</td><td rowspan=3>%s</td><td rowspan=3>%d</td><td rowspan=3 class=\"gate-%s\">%s</td>",
					html.EscapeString(name), html.EscapeString(sc.Class), fmtMs(sc.TTSSMs, 0), fmtMs(sc.WarmupMs, 0), sc.Relapses,
					sc.GateVerdict(), sc.GateVerdict())
			}
			label := rg
			if rg == "steady" && !sc.Steady && d.Count > 0 {
				// what the online tags called steady before the steady state was lost
				label = "steady (not held)"
			}
			fmt.Fprintf(b, "<td class=\"%s\">%s</td><td>%d</td><td>%.1f</td>%s</tr>\n", rg, label, d.Count, d.Rate, distCells(d))
		}
	}
	b.WriteString("</table>\n")
}

// writeSettledTable is the settled view of every scenario beside the
// online one, with how far the online tags were from it.
func writeSettledTable(b *strings.Builder, s *Summary) {
	b.WriteString("<h2>Settled view (the whole run, judged at its end)</h2>\n<table id=\"settled\"><tr><th>scenario</th><th>class</th><th>settled TTSS ms</th><th>online TTSS ms</th><th>steady iterations</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>max</th><th>error rate</th><th>online steady tags before the settled boundary</th><th>settled steady iterations tagged steady online</th><th>reason</th></tr>\n")
	for _, name := range s.SortedScenarios() {
		sc := s.Scenarios[name]
		v := sc.Settled
		if v == nil {
			continue
		}
		writeSettledRow(b, html.EscapeString(name), v, sc.TTSSMs)
		// each endpoint's own view (scope 'endpoint': its requests)
		for _, ep := range slices.Sorted(maps.Keys(v.Endpoints)) {
			var online *float64
			if d := sc.Endpoints[ep]; d != nil && d.SteadyStart != nil {
				online = &d.SteadyStart.ElapsedMs
			}
			writeSettledRow(b, "&nbsp;&nbsp;"+html.EscapeString(name+" "+ep), v.Endpoints[ep], online)
		}
	}
	b.WriteString("</table>\n")
}

// writeSettledRow is one row of the settled table: label is HTML.
func writeSettledRow(b *strings.Builder, label string, v *Settled, onlineTTSS *float64) {
	class := v.Class
	if v.Partial {
		class += " (partial)"
	}
	fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td>", label, html.EscapeString(class), fmtMs(v.TTSSMs, 0), fmtMs(onlineTTSS, 0))
	if st := v.Stats; v.Steady && st != nil {
		er := "-"
		if st.ErrorRate != nil {
			er = fmt.Sprintf("%.2f%%", 100**st.ErrorRate)
		}
		fmt.Fprintf(b, "<td>%d</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%s</td>", st.Count, st.P50Ms, st.P90Ms, st.P95Ms, st.P99Ms, st.MaxMs, er)
	} else {
		b.WriteString(strings.Repeat("<td>-</td>", 7))
	}
	if o := v.Online; o != nil {
		fmt.Fprintf(b, "<td>%.1f%%</td><td>%.1f%%</td>", 100*o.Contamination, 100*o.Coverage)
	} else {
		b.WriteString("<td>-</td><td>-</td>")
	}
	fmt.Fprintf(b, "<td>%s</td></tr>\n", html.EscapeString(v.Reason))
}

func distCells(d *Dist) string {
	if d.Count == 0 {
		return strings.Repeat("<td>-</td>", 6)
	}
	return fmt.Sprintf("<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>", d.P50, d.P90, d.P95, d.P99, d.P999, d.Max)
}

func writeColdStart(b *strings.Builder, s *Summary) {
	b.WriteString("<h2>Cold start</h2>\n<table id=\"coldstart\"><tr><th>scenario</th><th>cold iterations</th><th>cold duration ms</th><th>excess over steady mean ms</th><th>cold end (elapsed ms)</th><th>steady start (elapsed ms)</th><th>TTSS ms</th></tr>\n")
	for _, name := range s.SortedScenarios() {
		sc := s.Scenarios[name]
		pt := func(p *Point) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprintf("#%d (%.0f)", p.Index, p.ElapsedMs)
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%.0f</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			html.EscapeString(name), sc.ColdStart.Iterations, sc.ColdStart.DurationMs, fmtMs(sc.ColdStart.ExcessMs, 0),
			pt(sc.ColdEnd), pt(sc.SteadyStart), fmtMs(sc.TTSSMs, 0))
	}
	b.WriteString("</table>\n")
	if len(s.ConnectionColdStart) == 0 {
		return
	}
	b.WriteString("<h3>Connection pool, per phase</h3>\n<table id=\"connections\"><tr><th>phase</th><th>requests</th><th>new connections</th><th>connect ms</th><th>TLS ms</th><th title=\"seconds after the phase's first request\">last new connection s (from phase start)</th><th>new connections by regime</th><th>errors</th><th>5xx</th><th>no response</th><th>errors by regime</th></tr>\n")
	phases := make([]string, 0, len(s.ConnectionColdStart))
	for p := range s.ConnectionColdStart {
		phases = append(phases, p)
	}
	sort.Strings(phases)
	for _, p := range phases {
		c := s.ConnectionColdStart[p]
		last := "-"
		if c.LastNewConnectionMs != nil {
			last = fmt.Sprintf("%.1f", *c.LastNewConnectionMs/1000)
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%.1f</td><td>%.1f</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td></tr>\n",
			html.EscapeString(orDash(p)), c.Requests, c.NewConnections, c.ConnectMs, c.TLSMs, last, byRegime(c.NewConnectionsByRegime),
			c.Errors, c.Status5xx, c.NoResponse, byRegime(c.ErrorsByRegime))
	}
	b.WriteString("</table>\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func byRegime(m map[string]int64) string {
	var parts []string
	for _, r := range append(Regimes[:], "") { // the untagged last
		if v, ok := m[r]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", orUntagged(r), v))
		}
	}
	return html.EscapeString(strings.Join(parts, " "))
}

func orUntagged(r string) string {
	if r == "" {
		return "untagged"
	}
	return r
}

func writeRequests(b *strings.Builder, s *Summary) {
	if len(s.Requests) == 0 {
		return
	}
	b.WriteString("<h2>Requests per phase and endpoint</h2>\n")
	rows := slices.Clone(s.Requests)
	slices.SortStableFunc(rows, func(a, b *RequestRow) int { return compareTableKeys(a.tableKey(), b.tableKey()) })
	for i, row := range rows {
		if i == 0 || row.Phase != rows[i-1].Phase {
			if i > 0 {
				b.WriteString("</table>\n")
			}
			fmt.Fprintf(b, "<h3>phase %s</h3>\n<table class=\"requests\"><tr><th>scenario</th><th>endpoint</th><th>proto</th><th>regime</th><th>count</th><th>rate/s</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th><th>errors</th><th>error rate</th><th>new conns</th></tr>\n", html.EscapeString(orDash(row.Phase)))
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td><td>%d</td><td>%.1f</td>%s<td>%d</td><td>%.4f</td><td>%d</td></tr>\n",
			html.EscapeString(row.Scenario), html.EscapeString(orDash(row.Endpoint)), html.EscapeString(row.Protocol),
			html.EscapeString(row.Regime), html.EscapeString(orUntagged(row.Regime)), row.Count, row.Rate, distCells(&row.Dist),
			row.Errors, row.ErrorRate, row.NewConnections)
	}
	b.WriteString("</table>\n")
}

func writeEnvironment(b *strings.Builder, s *Summary) {
	envs := []Environment{s.Environment}
	if len(s.InstanceEnvironments) > 0 {
		envs = s.InstanceEnvironments
	}
	b.WriteString("<h2>Load generator</h2>\n<table id=\"environment\"><tr><th>instance</th><th>k6</th><th>xk6-regime</th><th>go</th><th>host</th><th>CPUs</th><th>governor</th><th>cgroup CPU limit</th><th>throttled periods</th><th>throttled ms</th><th>CPU utilisation</th></tr>\n")
	for i, e := range envs {
		fmt.Fprintf(b, "<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s (%s)</td><td>%d</td><td>%.0f</td><td>%.0f%%</td></tr>\n",
			i, html.EscapeString(e.K6Version), html.EscapeString(e.ExtensionVersion), html.EscapeString(e.GoVersion),
			html.EscapeString(e.Hostname), e.CPUs, html.EscapeString(e.Governor), html.EscapeString(e.CPULimit), html.EscapeString(e.Cgroup),
			e.ThrottledPeriods, e.ThrottledMs, 100*e.CPUUtilization)
	}
	b.WriteString("</table>\n")
}
