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
// (least to greatest, the median dashed), the warm-up end the runs agree
// on (a solid line) and the steady envelope (the
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

// svgFrame is a panel's plot area: blocks along x, latency on a log scale
// along y (lo to hi ms), inside the margins L, R, T, B of a W x H panel.
type svgFrame struct {
	W, H, L, R, T, B float64
	nb               int     // blocks
	lo, hi           float64 // ms at the bottom and the top
}

// x is the abscissa of a block's start (fractions of a block allowed).
func (f svgFrame) x(block float64) float64 { return f.L + block/float64(f.nb)*(f.W-f.L-f.R) }

// y is the ordinate of v ms, clamped to the plot area.
func (f svgFrame) y(v float64) float64 {
	y := f.T + (math.Log(f.hi)-math.Log(v))/(math.Log(f.hi)-math.Log(f.lo))*(f.H-f.T-f.B)
	return math.Max(f.T, math.Min(f.H-f.B, y))
}

// path draws the curve v(block) through the blocks' middles, lifting the
// pen where it has no value (v <= 0).
func (f svgFrame) path(b *strings.Builder, v func(k int) float64, attrs string) {
	var d strings.Builder
	pen := false
	for k := range f.nb {
		y := v(k)
		if y <= 0 {
			pen = false
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%.1f %.1f", cmd, f.x(float64(k)+0.5), f.y(y))
		pen = true
	}
	if d.Len() > 0 {
		fmt.Fprintf(b, `<path %s d="%s"/>`+"\n", attrs, d.String())
	}
}

// svgPanel draws one scope: title, warm-up and envelope, the curves, the axes.
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
	f := svgFrame{W: W, H: H, L: L, R: R, T: T, B: B, nb: nb, lo: lo / 1.1, hi: hi * 1.1}
	title := fmt.Sprintf("%s: %d runs; warm-up end median %.1f s (%.1f-%.1f s, %d without steady state); steady level %.3g ms, block medians %+.0f%% .. %+.0f%%",
		name, len(sc.RunMedians), sc.WarmupEnd.Median/1000, sc.WarmupEnd.Min/1000, sc.WarmupEnd.Max/1000, sc.NoSteady,
		sc.LevelMs, sc.Envelope.Median.Lo*100, sc.Envelope.Median.Hi*100)
	fmt.Fprintf(b, `<text x="%g" y="%g" class="title">%s</text>`+"\n", L, T-10, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#ccc"/>`+"\n", L, T, W-L-R, H-T-B)
	sc.svgWarmup(b, f, p.BlockMs)
	for _, run := range sc.RunMedians {
		f.path(b, func(k int) float64 { return run[k] }, `class="run" fill="none" stroke="#888" stroke-opacity="0.35"`)
	}
	f.path(b, func(k int) float64 { return sc.Median[k].Mid }, `class="average" fill="none" stroke="#1f77b4" stroke-width="2"`)
	sc.svgAxes(b, f, p.BlockMs/1000)
}

// svgWarmup shades the runs' warm-up ends (least to greatest), dashes
// their median, draws the end the runs agree on, and shades the steady
// envelope after the median.
func (sc *ProfileScope) svgWarmup(b *strings.Builder, f svgFrame, blockMs float64) {
	T, H, B, W, R := f.T, f.H, f.B, f.W, f.R
	agreed := func() {
		if sc.AgreedEndMs != nil {
			// the warm-up end the runs agree on, solid
			xa := f.x(*sc.AgreedEndMs / blockMs)
			fmt.Fprintf(b, `<line class="agreed-end" x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#a63603" stroke-width="1.5"/>`+"\n", xa, T, xa, H-B)
		}
	}
	if sc.WarmupEnd.N == 0 {
		// no run had a settled steady state: the agreed end alone
		agreed()
		return
	}
	x0, x1 := f.x(sc.WarmupEnd.Min/blockMs), f.x(sc.WarmupEnd.Max/blockMs)
	fmt.Fprintf(b, `<rect class="warmup-spread" x="%.1f" y="%g" width="%.1f" height="%g" fill="#fde2c4"/>`+"\n", x0, T, math.Max(x1-x0, 1), H-T-B)
	xm := f.x(sc.WarmupEnd.Median / blockMs)
	fmt.Fprintf(b, `<line class="warmup-end" x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#e6550d" stroke-dasharray="4 3"/>`+"\n", xm, T, xm, H-B)
	agreed()
	if sc.LevelMs > 0 {
		y0, y1 := f.y(sc.LevelMs*(1+sc.Envelope.Median.Hi)), f.y(sc.LevelMs*(1+sc.Envelope.Median.Lo))
		fmt.Fprintf(b, `<rect class="envelope" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d9f0d3" fill-opacity="0.8"/>`+"\n",
			xm, y0, W-R-xm, math.Max(y1-y0, 1))
	}
}

// svgAxes labels the seconds along x, and the latency at the bottom, the
// level and the top (no two labels closer than 14 px).
func (sc *ProfileScope) svgAxes(b *strings.Builder, f svgFrame, sec float64) {
	step := niceStep(float64(f.nb) * sec / 8)
	for s := 0.0; s <= float64(f.nb)*sec; s += step {
		x := f.x(s / sec)
		fmt.Fprintf(b, `<text x="%.1f" y="%g" text-anchor="middle">%g</text>`+"\n", x, f.H-f.B+16, s)
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" text-anchor="end">time since the scenario's first window (s)</text>`+"\n", f.W-f.R, f.H-4)
	var labelled []float64 // y of the labels drawn
	for _, v := range []float64{sc.LevelMs, f.lo * 1.1, f.hi / 1.1} {
		y := f.y(v)
		if v <= 0 || slices.ContainsFunc(labelled, func(o float64) bool { return math.Abs(o-y) < 14 }) {
			continue
		}
		labelled = append(labelled, y)
		fmt.Fprintf(b, `<text x="%g" y="%.1f" text-anchor="end">%.3g ms</text>`+"\n", f.L-4, y+4, v)
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
