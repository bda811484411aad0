package harness

import (
	"testing"
	"time"
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
