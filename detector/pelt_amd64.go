//go:build amd64 && !purego

package detector

import "golang.org/x/sys/cpu"

// useAVX2: Hindsight's PELT runs its segment costs and its dense steps on
// the AVX2 kernels of pelt_amd64.s, bit-identical to the Go code, when the
// CPU has AVX2 (decided at start).
var useAVX2 = cpu.X86.HasAVX2

// sumMinAVX2 returns the least a[i] + b[i] over the first len(a)&^3
// elements (+Inf for none).
//
//go:noescape
func sumMinAVX2(a, b []float64) float64

// pruneAVX2 is pruneDense over the first len(fm)&^3 elements.
//
//go:noescape
func pruneAVX2(fm, row []float64, pen, best float64) int

// costRowAVX2 writes dst[i] = segCost(c+i, t) (k0 = t-c, sb = s[t], qb =
// q[t]) for i in the first len(dst)&^3 elements, in groups of 4, up to the
// first group where a variance is NaN or +Inf; it returns how many.
//
//go:noescape
func costRowAVX2(dst, s, q []float64, sb, qb, k0 float64) int
