package detector

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The AVX2 kernels of Hindsight's PELT (pelt_amd64.s) compute what the Go
// code computes, bit for bit: TestPELTCachedExact checks whole runs against
// the reference loop; these check each kernel on the values that take its
// other branches (a variance <= 0, NaN or infinite, subnormal; pruned
// candidates at +Inf; ties after adding the penalty), at every length
// around a multiple of 4.

func requireAVX2(t *testing.T) {
	t.Helper()
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
}

func TestCostRowKernelExact(t *testing.T) {
	t.Parallel()
	requireAVX2(t)
	rng := rand.New(rand.NewPCG(7, 8))
	kinds := map[string]func(i int) float64{
		"noise":     func(int) float64 { return 1 + rng.NormFloat64() },
		"microsec":  func(int) float64 { return 1e-6 * (1 + 0.01*rng.NormFloat64()) },
		"huge":      func(int) float64 { return 1e150 * (1 + rng.Float64()) },
		"constant":  func(int) float64 { return 5 },                            // variance 0: minVar
		"twoValues": func(int) float64 { return float64(rng.IntN(2)) },         // rounding to <= 0
		"subnormal": func(int) float64 { return 1e-160 * (1 + rng.Float64()) }, // variances below the normal range
		"withNaN": func(i int) float64 {
			if i == 37 {
				return math.NaN()
			}
			return rng.Float64()
		},
		"overflow": func(i int) float64 { // squares beyond the range, sums not: variances +Inf
			if i < 80 {
				return 1 + rng.Float64()
			}
			return float64(1-2*(i%2)) * 1.2e154
		},
		"withInf": func(i int) float64 {
			if i == 50 {
				return math.Inf(1)
			}
			return rng.Float64()
		},
	}
	for name, gen := range kinds {
		y := make([]float64, 90)
		for i := range y {
			y[i] = gen(i)
		}
		var p pelt
		p.init(y)
		for t2 := 2; t2 <= len(y); t2++ {
			row := make([]float64, t2-1)
			p.costRow(row, t2)
			for c := range row {
				want := p.segCost(c, t2)
				require.Equal(t, math.Float64bits(want), math.Float64bits(row[c]),
					"%s: cost(%d, %d) = %v, want %v", name, c, t2, row[c], want)
			}
		}
		p.release()
	}
}

// TestCostRowKernelLogEdges: variances on the edges of the logarithm's
// branches (a mantissa of exactly sqrt(2)/2, where amd64's math.Log and
// math/log.go differ; powers of two; the extremes of the range), set
// exactly through the prefix sums: with no sum, a length that is a power of
// two and q[t] - q[c] = v * (t - c), the variance is v.
func TestCostRowKernelLogEdges(t *testing.T) {
	t.Parallel()
	requireAVX2(t)
	const n = 64
	edges := []float64{
		// of the mantissas sqrt(2)/2 * 2^j, only j = 32 gives another
		// result when it is not reduced
		math.Sqrt2 / 2 * 0x1p32, math.Sqrt2 / 2, math.Sqrt2, math.Sqrt2 / 2 * 0x1p-20,
		math.Nextafter(math.Sqrt2/2, 0), math.Nextafter(math.Sqrt2/2, 1),
		1, 0.5, 2, 0x1p-1000, 0x1p1000, 5e-324, 1e-300, 1e300, minVar, 0, -1,
	}
	for _, v := range edges {
		for _, k := range []int{1, 2, 4, 8, 16, 32, 64} {
			p := pelt{s: make([]float64, n+1), q: make([]float64, n+1)}
			rng := rand.New(rand.NewPCG(uint64(k), 1))
			for c := range n {
				p.q[c] = -float64(n-c) * (0.5 + rng.Float64())
			}
			p.q[n-k] = -v * float64(k)
			row := make([]float64, n)
			p.costRow(row, n)
			for c := range row {
				want := p.segCost(c, n)
				require.Equal(t, math.Float64bits(want), math.Float64bits(row[c]),
					"v %g: cost(%d, %d) = %v, want %v", v, c, n, row[c], want)
			}
		}
	}
}

func TestDenseKernelsExact(t *testing.T) {
	t.Parallel()
	requireAVX2(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for n := range 70 {
		for trial := range 20 {
			fm, row := make([]float64, n), make([]float64, n)
			for i := range fm {
				fm[i] = 100 * rng.NormFloat64()
				if rng.IntN(4) == 0 {
					fm[i] = math.Inf(1) // pruned before
				}
				row[i] = 1000 * rng.Float64()
			}
			if n > 0 && trial%2 == 1 {
				// ties: values within rounding of the least, which the
				// penalty makes equal (the first of them is the argument)
				for range 3 {
					i := rng.IntN(n)
					fm[i], row[i] = -1e3, 0
				}
				i := rng.IntN(n)
				fm[i], row[i] = math.Nextafter(-1e3, 0), 0
			}
			want := math.Inf(1)
			for i := range fm {
				want = min(want, fm[i]+row[i])
			}
			got := sumMin(fm, row)
			require.Equal(t, want, got, "sumMin n %d", n)
			pen := 5e4 * rng.Float64()
			switch {
			case trial%3 == 0:
				pen = 1e17 // the sums differ by less than the penalty's ulp
			case trial%2 == 1 && n > 0:
				// a candidate exactly at the pruning bound stays
				pen = 500
				i := rng.IntN(n)
				fm[i], row[i] = -1e3+500, 0
			}
			best := got + pen
			if n > 0 && trial%5 == 4 {
				// a NaN cost is pruned, as the list step prunes it
				row[rng.IntN(n)] = math.NaN()
			}
			fmA, fmB := append([]float64{}, fm...), append([]float64{}, fm...)
			argA := pruneDense(fmA, row, pen, best)
			argB := prunePure(fmB, row, pen, best)
			require.Equal(t, argB, argA, "arg, n %d", n)
			for i := range fmA {
				require.Equal(t, math.Float64bits(fmB[i]), math.Float64bits(fmA[i]), "fm[%d], n %d", i, n)
			}
		}
	}
	// the 16-lane loop: no candidate pruned before, the tie first (the
	// 4-lane search ends there), a NaN cost in the third block of 16
	fm, row := make([]float64, 64), make([]float64, 64)
	for i := range fm {
		fm[i], row[i] = 0, 1 // cost 1 <= best: none pruned
	}
	row[37] = math.NaN()
	pen := 10.0
	best := 1 + pen
	fmA, fmB := append([]float64{}, fm...), append([]float64{}, fm...)
	require.Equal(t, prunePure(fmB, row, pen, best), pruneDense(fmA, row, pen, best))
	require.True(t, math.IsInf(fmB[37], 1), "the list step prunes a NaN cost")
	for i := range fmA {
		require.Equal(t, math.Float64bits(fmB[i]), math.Float64bits(fmA[i]), "fm[%d]", i)
	}
}
