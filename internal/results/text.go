package results

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// TextTable is the console regime table: per scenario the class, the steady
// gate's verdict (held, never-reached, not-held), TTSS, cold-start cost,
// steady p50/p95/p99 (iteration duration, ms) and relapses; then the
// environment warnings.
func TextTable(s *Summary) string {
	var b strings.Builder
	if !s.Completed() {
		fmt.Fprintf(&b, "RUN ENDED EARLY: %s\n", s.EndText())
	}
	b.WriteString("Regimes per scenario (iteration duration, ms; steady figures exclude cold and warm-up):\n")
	fmt.Fprintf(&b, "  %-16s %-16s %-13s %7s %7s %8s %9s %10s %12s %10s %9s %9s %8s\n",
		"scenario", "class", "steady-state", "cold", "warmup", "steady", "TTSS ms", "warm-up ms", "cold cost ms", "steady p50", "p95", "p99", "relapses")
	for _, name := range s.SortedScenarios() {
		sc := s.Scenarios[name]
		get := func(r string) *Dist {
			if d := sc.Regimes[r]; d != nil {
				return d
			}
			return &Dist{}
		}
		st := get("steady")
		q := func(v float64) string {
			if st.Count == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(&b, "  %-16s %-16s %-13s %7d %7d %8d %9s %10s %12.0f %10s %9s %9s %8d\n",
			name, sc.Class, sc.GateVerdict(), get("cold").Count, get("warmup").Count, st.Count, fmtMs(sc.TTSSMs, 0), fmtMs(sc.WarmupMs, 0),
			sc.ColdStart.DurationMs, q(st.P50), q(st.P95), q(st.P99), sc.Relapses)
	}
	settledTable(&b, s)
	warnings := append(append([]string(nil), s.Environment.Warnings...), s.Warnings...)
	for _, w := range dedupe(warnings) {
		fmt.Fprintf(&b, "  WARNING: %s\n", w)
	}
	return b.String()
}

// GateVerdict is the steady gate's verdict on the scenario, as k6's
// regime_steady metric judges it: "held" (steady state reached and held to
// the end), "not-held" (reached, then lost) or "never-reached".
func (sc *Scenario) GateVerdict() string {
	switch {
	case sc.Steady:
		return "held"
	case sc.TTSSMs != nil || sc.Relapses > 0:
		return "not-held"
	}
	return "never-reached"
}

// settledTable is the settled view of every scenario beside the online one:
// where steady state began with the whole run in hand, its figures, and how
// far the online tags were from it.
func settledTable(b *strings.Builder, s *Summary) {
	any := false
	for _, sc := range s.Scenarios {
		any = any || sc.Settled != nil
	}
	if !any {
		return
	}
	b.WriteString("Settled view (the whole run re-segmented at its end; iteration duration, ms):\n")
	fmt.Fprintf(b, "  %-16s %-16s %9s %10s %10s %9s %9s %11s %9s %9s\n",
		"scenario", "class", "TTSS ms", "steady n", "steady p50", "p95", "p99", "error rate", "online <", "online ⊂")
	row := func(name string, v *Settled) {
		class := v.Class
		if v.Partial {
			class += " (partial)"
		}
		if !v.Steady || v.Stats == nil {
			fmt.Fprintf(b, "  %-16s %-16s %9s  no steady state: %s\n", name, class, "-", v.Reason)
			return
		}
		er := "-"
		if v.Stats.ErrorRate != nil {
			er = fmt.Sprintf("%.2f%%", 100**v.Stats.ErrorRate)
		}
		cont, cov := "-", "-"
		if o := v.Online; o != nil {
			cont, cov = fmt.Sprintf("%.1f%%", 100*o.Contamination), fmt.Sprintf("%.1f%%", 100*o.Coverage)
		}
		fmt.Fprintf(b, "  %-16s %-16s %9s %10d %10.2f %9.2f %9.2f %11s %9s %9s\n",
			name, class, fmtMs(v.TTSSMs, 0), v.Stats.Count, v.Stats.P50Ms, v.Stats.P95Ms, v.Stats.P99Ms, er, cont, cov)
	}
	for _, name := range s.SortedScenarios() {
		v := s.Scenarios[name].Settled
		if v == nil {
			continue
		}
		row(name, v)
		// each endpoint's own view (scope 'endpoint': its requests, ms)
		for _, ep := range slices.Sorted(maps.Keys(v.Endpoints)) {
			row("  "+ep, v.Endpoints[ep])
		}
	}
	b.WriteString("  (online <: steady-tagged iterations that started before the settled boundary; online ⊂: settled-steady iterations tagged steady)\n")
}
