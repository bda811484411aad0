package results

import (
	"fmt"
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
