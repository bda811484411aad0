//go:build !amd64 || purego

package detector

// Without the AVX2 kernels (pelt_amd64.s) the Go code computes everything.
const useAVX2 = false

func sumMinAVX2(a, b []float64) float64                       { panic("detector: no AVX2 kernels") }
func pruneAVX2(fm, row []float64, pen, best float64) int      { panic("detector: no AVX2 kernels") }
func costRowAVX2(dst, s, q []float64, sb, qb, k0 float64) int { panic("detector: no AVX2 kernels") }
