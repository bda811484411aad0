package influxdb

// The points the output writes: an event (a transition, a closed window)
// as it happens, and the run's report at the end.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/engine"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// Measurements the output writes.
const (
	measTransition = "regime_transition"
	measWindow     = "regime_window"
	measSummary    = "regime_summary"
	measOutput     = "regime_output"
)

// event is one observer call, copied.
type event struct {
	scenario, endpoint string
	isWindow           bool
	tr                 engine.TransitionRecord
	w                  detector.Window
}

// point converts an event into its InfluxDB point.
func (e *event) point() *write.Point {
	tags := map[string]string{"scenario": e.scenario}
	if e.endpoint != "" {
		tags["endpoint"] = e.endpoint
	}
	if e.isWindow {
		w := &e.w
		tags["regime"] = w.Regime.String()
		fields := map[string]any{
			"seq": int64(w.Seq), "n": int64(w.N), "stable": w.Stable,
			"first_index": w.First.Index, "last_index": w.Last.Index,
		}
		addFloat(fields, "median", w.Median)
		addFloat(fields, "tail", w.Tail)
		addFloat(fields, "tail_quantile", w.TailQuantile)
		addFloat(fields, "drift", w.Drift)
		return write.NewPoint(measWindow, tags, fields, time.Unix(0, w.Last.Time))
	}
	t := &e.tr
	tags["from"], tags["to"], tags["kind"] = t.From.String(), t.To.String(), t.Kind
	elapsed := ms(t.Elapsed)
	label := e.scenario
	if e.endpoint != "" {
		label += " " + e.endpoint
	}
	fields := map[string]any{
		"index": t.At.Index, "boundary": t.Boundary.Index,
		"elapsed_ms":          elapsed,
		"boundary_elapsed_ms": elapsed - ms(time.Duration(t.At.Time-t.Boundary.Time)),
		"text": fmt.Sprintf("%s: %s → %s (%s) at iteration %d, boundary %d",
			label, t.From, t.To, t.Kind, t.At.Index, t.Boundary.Index),
	}
	return write.NewPoint(measTransition, tags, fields, time.Unix(0, t.At.Time))
}

// addFloat sets a float field unless it is NaN or infinite (line protocol
// has no representation for them).
func addFloat(fields map[string]any, k string, v float64) {
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		fields[k] = v
	}
}

// addFloatPtr sets a float field when v is set (and finite).
func addFloatPtr(fields map[string]any, k string, v *float64) {
	if v != nil {
		addFloat(fields, k, *v)
	}
}

// SummaryPoints turns the run's final report into one regime_summary point
// per scenario x regime (scenario-level values repeated on each, so that one
// query finds them) and one regime_output point with the output's own
// counts c: the points Stop writes last.
func SummaryPoints(rep *engine.RunReport, c Counts, at time.Time) []*write.Point {
	total := c.Dropped
	var points []*write.Point
	for _, name := range slices.Sorted(maps.Keys(rep.Scenarios)) {
		sc := rep.Scenarios[name]
		common := map[string]any{
			"dropped_points": total, "iterations": sc.Iterations, "untagged": sc.Untagged,
			"relapses": sc.Relapses, "steady": sc.Steady, "class": sc.Class,
			"cold_start_iterations": sc.ColdStart.Iterations,
		}
		if rep.End != nil {
			// how the run ended (completed, interrupted, aborted): an
			// interrupted run's summary is not a whole run's
			common["end_status"] = rep.End.Status
		}
		addFloat(common, "cold_start_ms", sc.ColdStart.DurationMs)
		addFloatPtr(common, "ttss_ms", sc.TTSSMs)
		addFloatPtr(common, "declared_after_ms", sc.DeclaredAfterMs)
		addFloatPtr(common, "cold_start_excess_ms", sc.ColdStart.ExcessMs)
		for _, p := range []struct {
			name string
			at   *results.Point
		}{{"cold_end", sc.ColdEnd}, {"steady_start", sc.SteadyStart}, {"declared_at", sc.DeclaredAt}} {
			if p.at != nil {
				common[p.name+"_index"] = p.at.Index
				addFloat(common, p.name+"_elapsed_ms", p.at.ElapsedMs)
			}
		}
		for _, r := range detector.RegimeNames() {
			d := sc.Regimes[r]
			fields := maps.Clone(common)
			fields["count"] = d.Count
			addFloat(fields, "sum_ms", d.SumMs)
			for _, f := range []struct {
				name string
				v    *float64
			}{{"min", d.Min}, {"mean", d.Mean}, {"p50", d.P50}, {"p90", d.P90}, {"p95", d.P95}, {"p99", d.P99}, {"p99_9", d.P999}, {"max", d.Max}} {
				addFloatPtr(fields, f.name, f.v)
			}
			points = append(points, write.NewPoint(measSummary,
				map[string]string{"scenario": name, "regime": r}, fields, at))
		}
	}
	points = append(points, write.NewPoint(measOutput, map[string]string{"output": Name}, map[string]any{
		"points_dropped":        total,
		"points_dropped_buffer": c.DroppedBuffer,
		"points_unacknowledged": c.Unacknowledged,
		"points_written":        c.Written,
		"write_errors":          c.WriteErrors,
	}, at))
	return points
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
