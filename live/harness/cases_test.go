package harness

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every case has a name of its own across the groups, `all` holds the
// held-out cases but not the long ones, and `long` runs for LongDuration.
func TestCaseGroups(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range append(append(append(AllCases(), HeldOutCases()...), LongCases()...), ShortCases()...) {
		if seen[c.Name] {
			t.Errorf("case %s is defined twice", c.Name)
		}
		seen[c.Name] = true
		if c.Busy < 0 || c.Busy > 1 {
			t.Errorf("case %s: Busy %g outside [0, 1]", c.Name, c.Busy)
		}
	}
	all, err := SelectCases("all")
	if err != nil {
		t.Fatal(err)
	}
	inAll := map[string]bool{}
	for _, c := range all {
		inAll[c.Name] = true
	}
	for _, c := range HeldOutCases() {
		if !inAll[c.Name] {
			t.Errorf("held-out case %s is not in all", c.Name)
		}
	}
	unseen, err := SelectCases("unseen")
	if err != nil || len(unseen) != len(UnseenCases()) || len(unseen) == 0 {
		t.Fatalf("SelectCases(unseen) = %d cases, %v", len(unseen), err)
	}
	inHeldOut := map[string]bool{}
	for _, c := range HeldOutCases() {
		inHeldOut[c.Name] = true
	}
	for _, c := range unseen {
		if !inHeldOut[c.Name] {
			t.Errorf("unseen case %s is not held out", c.Name)
		}
	}
	long, err := SelectCases("long")
	if err != nil {
		t.Fatal(err)
	}
	if len(long) == 0 {
		t.Fatal("no long cases")
	}
	for _, c := range long {
		if inAll[c.Name] {
			t.Errorf("long case %s is in all", c.Name)
		}
		if c.Load.Duration != LongDuration || c.Load.Duration < 5*time.Minute {
			t.Errorf("long case %s runs %s", c.Name, c.Load.Duration)
		}
	}
	// a case named on its own is found in every group
	if got, err := SelectCases("pypy/open,go-io/open-5m"); err != nil || len(got) != 2 || got[1].Load.Duration != LongDuration {
		t.Fatalf("SelectCases(pypy/open,go-io/open-5m) = %v, %v", got, err)
	}
}

// TestBaseEnv: the children get the caller's PATH and locale, not a variable
// that would change the run (a profile, an output, another database, JIT
// options).
func TestBaseEnv(t *testing.T) {
	t.Setenv("K6_REGIME_PROFILE", "/tmp/p.json")
	t.Setenv("K6_OUT", "influxdb=http://example.com")
	t.Setenv("DATABASE_URL", "postgres://example.com/db")
	t.Setenv("JAVA_TOOL_OPTIONS", "-Xint")
	t.Setenv("LC_ALL", "C.UTF-8")
	env := strings.Join(baseEnv(), "\n")
	for _, k := range []string{"K6_REGIME_PROFILE=", "K6_OUT=", "DATABASE_URL=", "JAVA_TOOL_OPTIONS="} {
		require.NotContains(t, env, k)
	}
	require.Contains(t, env, "PATH="+os.Getenv("PATH"))
	require.Contains(t, env, "LC_ALL=C.UTF-8")
}

// TestStepDrop: the step's drop is where the iterations stay fast, not a
// lone fast one before it (a failed request answered at once).
func TestStepDrop(t *testing.T) {
	var it []Iteration
	for i := range 400 {
		start := float64(i) * 0.02 // 8 s
		ms := 40.0
		if start >= 5 {
			ms = 5
		}
		if i == 50 { // 1 s in: a fast failure
			ms = 0.3
		}
		if i == 300 { // after the drop: a slow outlier
			ms = 45
		}
		it = append(it, Iteration{Start: start, Ms: ms})
	}
	// in arrival (end) order, not start order
	it[100], it[101] = it[101], it[100]
	require.InDelta(t, 5.0, stepDrop(it), 1e-9)
	require.True(t, math.IsInf(stepDrop(it[:200]), 1), "no drop in the first 4 s")
}

// TestBoundAddr: the harness reads the address each service bound on port 0
// from its output: the services' "listening on" line and the demo
// service's slog line; nothing before the service printed it.
func TestBoundAddr(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]string{
		"gosvc listening on 127.0.0.1:40123\n": "127.0.0.1:40123",
		`time=2026-11-27T23:11:56.055Z level=INFO msg="demo service listening" http=http://127.0.0.1:43653 grpc=127.0.0.1:40939 database=simulated` + "\n": "127.0.0.1:43653",
		"starting\n": "",
		`msg="demo service listening" http=http://0.0.0.0:43653 grpc=0.0.0.0:1`: "",
		`msg="demo service listening" http=http://127.0.0.1:436`:                "", // a line still being written
	} {
		if got := boundAddr(out); got != want {
			t.Errorf("boundAddr(%q) = %q, want %q", out, got, want)
		}
	}
}
