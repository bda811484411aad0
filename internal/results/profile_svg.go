package results

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// SVG draws the profile, a panel per scope: every run's block medians
// faint, their median over the runs bold, the runs' warm-up ends shaded
// (least to greatest, the median dashed) and the steady envelope (the
// level and how far steady block medians wander, 5th to 95th percentile)
// shaded after the median warm-up end. Latency on a log scale.
func (p *Profile) SVG() string {
	const W, H, L, R, T, B = 960, 260, 64, 16, 30, 34
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		W, H*len(p.Scopes), W, H*len(p.Scopes))
	for i, sc := range p.Scopes {
		fmt.Fprintf(&b, `<g transform="translate(0,%d)" class="scope">`+"\n", i*H)
		sc.svgPanel(&b, p, W, H, L, R, T, B)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func (sc *ProfileScope) svgPanel(b *strings.Builder, p *Profile, W, H, L, R, T, B float64) {
	name := sc.Scenario
	if sc.Endpoint != "" {
		name += "[" + sc.Endpoint + "]"
	}
	nb := len(sc.Median)
	lo, hi := math.Inf(1), 0.0
	for _, m := range sc.Median {
		if m.Runs > 0 {
			lo, hi = min(lo, m.Lo), max(hi, m.Hi)
		}
	}
	if nb == 0 || hi <= 0 || math.IsInf(lo, 1) {
		fmt.Fprintf(b, `<text x="%g" y="%g">%s: no windows</text>`+"\n", L, T, html.EscapeString(name))
		return
	}
	lo, hi = lo/1.1, hi*1.1
	sec := p.BlockMs / 1000
	xOf := func(block float64) float64 { return L + block/float64(nb)*(W-L-R) }
	yOf := func(v float64) float64 {
		return T + (math.Log(hi)-math.Log(v))/(math.Log(hi)-math.Log(lo))*(H-T-B)
	}
	clampY := func(v float64) float64 { return math.Max(T, math.Min(H-B, yOf(v))) }
	title := fmt.Sprintf("%s: %d runs; warm-up end median %.1f s (%.1f-%.1f s, %d without steady state); steady level %.3g ms, block medians %+.0f%% .. %+.0f%%",
		name, len(sc.RunMedians), sc.WarmupEnd.Median/1000, sc.WarmupEnd.Min/1000, sc.WarmupEnd.Max/1000, sc.NoSteady,
		sc.LevelMs, sc.Envelope.Median.Lo*100, sc.Envelope.Median.Hi*100)
	fmt.Fprintf(b, `<text x="%g" y="%g" class="title">%s</text>`+"\n", L, T-10, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#ccc"/>`+"\n", L, T, W-L-R, H-T-B)
	if sc.WarmupEnd.N > 0 {
		x0, x1 := xOf(sc.WarmupEnd.Min/p.BlockMs), xOf(sc.WarmupEnd.Max/p.BlockMs)
		fmt.Fprintf(b, `<rect class="warmup-spread" x="%.1f" y="%g" width="%.1f" height="%g" fill="#fde2c4"/>`+"\n", x0, T, math.Max(x1-x0, 1), H-T-B)
		xm := xOf(sc.WarmupEnd.Median / p.BlockMs)
		fmt.Fprintf(b, `<line class="warmup-end" x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#e6550d" stroke-dasharray="4 3"/>`+"\n", xm, T, xm, H-B)
		if sc.LevelMs > 0 {
			y0, y1 := clampY(sc.LevelMs*(1+sc.Envelope.Median.Hi)), clampY(sc.LevelMs*(1+sc.Envelope.Median.Lo))
			fmt.Fprintf(b, `<rect class="envelope" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d9f0d3" fill-opacity="0.8"/>`+"\n",
				xm, y0, W-R-xm, math.Max(y1-y0, 1))
		}
	}
	path := func(v func(k int) float64, attrs string) {
		var d strings.Builder
		pen := false
		for k := range nb {
			y := v(k)
			if y <= 0 {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, xOf(float64(k)+0.5), clampY(y))
			pen = true
		}
		if d.Len() > 0 {
			fmt.Fprintf(b, `<path %s d="%s"/>`+"\n", attrs, d.String())
		}
	}
	for _, run := range sc.RunMedians {
		path(func(k int) float64 { return run[k] }, `class="run" fill="none" stroke="#888" stroke-opacity="0.35"`)
	}
	path(func(k int) float64 { return sc.Median[k].Mid }, `class="average" fill="none" stroke="#1f77b4" stroke-width="2"`)
	// axes: seconds, and the latency at the bottom, the level and the top
	step := niceStep(float64(nb) * sec / 8)
	for s := 0.0; s <= float64(nb)*sec; s += step {
		x := xOf(s / sec)
		fmt.Fprintf(b, `<text x="%.1f" y="%g" text-anchor="middle">%g</text>`+"\n", x, H-B+16, s)
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" text-anchor="end">time since the scenario's first window (s)</text>`+"\n", W-R, H-4)
	var labelled []float64 // y of the labels drawn: none closer than 14 px
	for _, v := range []float64{sc.LevelMs, lo * 1.1, hi / 1.1} {
		y := clampY(v)
		if v <= 0 || slices.ContainsFunc(labelled, func(o float64) bool { return math.Abs(o-y) < 14 }) {
			continue
		}
		labelled = append(labelled, y)
		fmt.Fprintf(b, `<text x="%g" y="%.1f" text-anchor="end">%.3g ms</text>`+"\n", L-4, y+4, v)
	}
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
