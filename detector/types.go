package detector

import (
	"fmt"
	"strings"
)

// Regime is the phase an observation belongs to. Regimes only move forward
// (cold -> warmup -> steady), except steady -> warmup through a reported
// relapse.
type Regime uint8

// Regimes.
const (
	Cold Regime = iota
	Warmup
	Steady
)

// The regimes' names: the values of the regime tag.
const (
	coldName   = "cold"
	warmupName = "warmup"
	steadyName = "steady"
)

// regimeNames are the regimes' names in their order.
var regimeNames = [...]string{Cold: coldName, Warmup: warmupName, Steady: steadyName}

// RegimeNames returns the regimes' names in their order: cold, warmup,
// steady. Every table, tag and file of the project spells them so.
func RegimeNames() [3]string { return regimeNames }

func (r Regime) String() string {
	if int(r) < len(regimeNames) {
		return regimeNames[r]
	}
	return "unknown"
}

// LookupRegime returns the regime a name (as String writes it) stands for;
// ok is false for any other string. It allocates nothing (the k6 glue calls
// it per sample).
func LookupRegime(name string) (r Regime, ok bool) {
	switch name { // constant cases: the compiler compares lengths first
	case coldName:
		return Cold, true
	case warmupName:
		return Warmup, true
	case steadyName:
		return Steady, true
	}
	return 0, false
}

// ParseRegime is LookupRegime with an error that names the valid names.
func ParseRegime(name string) (Regime, error) {
	if r, ok := LookupRegime(name); ok {
		return r, nil
	}
	return 0, fmt.Errorf("regime must be one of %s, got %q", strings.Join(regimeNames[:], ", "), name)
}

// MarshalText writes the regime name.
func (r Regime) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a regime name (ParseRegime).
func (r *Regime) UnmarshalText(b []byte) error {
	v, err := ParseRegime(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Class is the shape of the whole series so far, after Barrett et al.,
// "Virtual Machine Warmup Blows Hot and Cold", OOPSLA 2017.
type Class uint8

// Classes.
const (
	Undecided     Class = iota
	Flat                // steady from the start (after the cold tail)
	ClassWarmup         // settled faster than it started
	Slowdown            // settled slower than it started
	NoSteadyState       // never settled, or settled and lost it
)

func (c Class) String() string {
	switch c {
	case Undecided:
		return "undecided"
	case Flat:
		return "flat"
	case ClassWarmup:
		return "warmup"
	case Slowdown:
		return "slowdown"
	case NoSteadyState:
		return "no-steady-state"
	}
	return "unknown"
}

// MarshalText writes the class name.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Point locates an observation: its 0-based index and its timestamp.
type Point struct {
	Index int64 `json:"index"`
	Time  int64 `json:"time"`
}

// Transition kinds.
const (
	KindColdEnd = "cold_end"
	KindSteady  = "steady"
	KindRelapse = "relapse"
)

// Transition is a regime change. At is the observation at which it was
// decided (online); Boundary is where, in hindsight, the new regime began.
// A steady state that resumes after an excursion (the level came back
// within the band of the one a relapse left) is a KindSteady transition
// decided At now whose Boundary is that earlier steady state's start, so
// it precedes the relapse before it; the excursion's observations were
// counted in warm-up as they arrived, and Snapshot.DeclaredAt keeps the
// first declaration.
type Transition struct {
	From, To Regime
	At       Point
	Boundary Point
	Kind     string
}

// Window summarises one closed window of observations.
type Window struct {
	Seq          int
	First, Last  Point
	N            int
	Median, Tail float64
	// TailQuantile is the quantile (percent) Tail really is: the configured
	// one, capped so that at least tail_min_above samples lie above it.
	// Tail is that quantile for both methods; the service method's dual
	// gate judges it smoothed over the ranks around it (the geometric mean
	// of as many values as lie above it, the largest half as many left
	// out), which is not reported.
	TailQuantile float64
	// Drift is the relative change of Median versus the previous window.
	Drift float64
	// Stable reports, in steady state, whether the window lies within the
	// tolerance band of the steady level; in warmup it is true only for the
	// window whose close declared steady state.
	Stable bool
	// Regime is the regime in force after the window was processed.
	Regime Regime
}

// Relapse is a lost steady state: the median level moved from From to To,
// starting at Boundary, decided at At.
type Relapse struct {
	At       Point
	Boundary Point
	From, To float64
}

// Snapshot is the detector state at one moment.
type Snapshot struct {
	N      int64
	Regime Regime
	Class  Class
	// ColdEnd is the first observation after the cold tail (0 when none);
	// nil while the cold tail has not ended.
	ColdEnd *Point
	// SteadyStart is the first observation of the current steady segment,
	// found retroactively; DeclaredAt is where it was declared online
	// (DeclaredAt.Index >= SteadyStart.Index). Both nil when not steady.
	SteadyStart, DeclaredAt *Point
	// Relapses are the first 64 relapses; NRelapses counts them all.
	Relapses  []Relapse
	NRelapses int
	// Counts holds observations per online regime (the regime in force when
	// the observation arrived); it sums to N.
	Counts     [3]int64
	OutOfRange int64
	Windows    int
}
