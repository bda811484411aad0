package detector

import (
	"math"
	"slices"
)

// Stage 4 of the settled view: a trend over the steady stretch. A slow
// drift passes the walk-back segment by segment (each step smaller than
// the tolerance); what gives it away is the slope over the whole stretch.
// The slope is Theil-Sen's (Theil 1950; Sen, JASA 1968): the median of the
// slopes between every pair of blocks, robust to 29% of wild blocks. Its
// confidence interval is Sen's: the order statistics of the pairwise slopes
// at (N ∓ z·√Var S)/2, where Var S = m(m−1)(2m+5)/18 is the variance of
// Kendall's S under no trend; block medians are autocorrelated (the
// machine's waves), so m is the effective number of blocks of an AR(1)
// series with the lag-1 autocorrelation ρ of the detrended blocks, m =
// n(1−ρ)/(1+ρ) (Bayley & Hammersley 1946), and Var S is inflated by n/m
// (Lettenmaier, Water Resour. Res. 1976). The stretch trends when the change's interval excludes no
// change (significant), its estimate (slope × span) lies beyond the
// tolerance (larger than the wander) and its blocks are monotone (below).

// A significant change beyond the tolerance is not yet a trend: on 2
// cores shared by k6 and the service, the level of a settled service
// switches by 25-45% at random times and stays for tens of seconds, which
// makes a significant Theil-Sen change of one run (the live harness's Go
// control, Node, the demo service on PostgreSQL). A drift or a slowdown
// moves on at every scale: its blocks are monotone, Kendall's tau (the
// share of rising pairs of blocks minus that of falling ones, read off the
// same pairwise slopes) beyond trendTau; a level that switched once is not
// (the same rule as the online gate's, Detector.Drift).

// trendZ is the normal quantile of the slope's interval (two-sided 95%).
const trendZ = 1.96

// trendTau is how monotone the steady stretch's blocks must be for its
// change to be a trend.
const trendTau = 0.75

// theilSen returns the Theil-Sen slope of y against its index, the bounds
// of its confidence interval and Kendall's tau of y against its index.
func theilSen(y []float64) (slope, lo, hi, tau float64) {
	n := len(y)
	if n < 3 {
		return 0, math.Inf(-1), math.Inf(1), 0
	}
	slopes := make([]float64, 0, n*(n-1)/2)
	conc := 0
	for i := 0; i < n-1; i++ {
		for j := i + 1; j < n; j++ {
			d := y[j] - y[i]
			switch {
			case d > 0:
				conc++
			case d < 0:
				conc--
			}
			slopes = append(slopes, d/float64(j-i))
		}
	}
	tau = float64(conc) / float64(len(slopes))
	slices.Sort(slopes)
	N := len(slopes)
	slope = slopes[N/2]
	if N%2 == 0 {
		slope = (slopes[N/2-1] + slopes[N/2]) / 2
	}
	// effective number of blocks under AR(1) autocorrelation
	r := make([]float64, n)
	var mean float64
	for i, v := range y {
		r[i] = v - slope*float64(i)
		mean += r[i]
	}
	mean /= float64(n)
	var num, den float64
	for i := range r {
		d := r[i] - mean
		den += d * d
		if i > 0 {
			num += d * (r[i-1] - mean)
		}
	}
	rho := 0.0
	if den > 0 {
		rho = min(max(num/den, 0), 0.95)
	}
	fn := float64(n)
	m := max(3, fn*(1-rho)/(1+rho))
	// Var S inflated by n/m (m effective blocks), read off the N slopes
	c := trendZ * math.Sqrt(fn*(fn-1)*(2*fn+5)/18*fn/m)
	l := int(math.Floor((float64(N) - c) / 2))
	u := int(math.Ceil((float64(N)+c)/2)) - 1
	lo, hi = math.Inf(-1), math.Inf(1)
	if l >= 0 {
		lo = slopes[l]
	}
	if u < N {
		hi = slopes[u]
	}
	return slope, lo, hi, tau
}
