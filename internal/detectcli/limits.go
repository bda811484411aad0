package detectcli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.k6.io/k6/v2/errext"

	"github.com/xk6-regime/xk6-regime/internal/cliexit"
	"github.com/xk6-regime/xk6-regime/internal/distinct"
)

// Exit statuses of detect (the same under `k6 x regime detect` and Run).
const (
	exitFileErrors = 1             // a file or series had errors (named on stderr); the others were processed
	exitUsage      = cliexit.Usage // bad flag, option value or arguments; nothing was processed
)

// usageError marks err as a usage error (exit status 2).
func usageError(err error) error { return cliexit.With(err, exitUsage) }

// usageArgs makes a cobra argument check's error a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return cliexit.Args(check, exitUsage)
}

// exitCode is the exit status for err: its errext code, else 1.
func exitCode(err error) int {
	var ec errext.HasExitCode
	if errors.As(err, &ec) {
		return int(ec.ExitCode())
	}
	return exitFileErrors
}

// DefaultMaxGroups is the default of --max-groups: the series of one file
// held at once. A series costs about 240 KiB of allocated memory with the
// benchmark defaults (measured on today's detector; little of it resident
// while its histograms stay sparse).
const DefaultMaxGroups = 1000

// maxOverflowNames bounds the distinct group names counted beyond the cap
// (8-byte hashes); beyond it the count of groups is a lower bound.
const maxOverflowNames = 1 << 20

// overflow counts the rows and distinct groups beyond --max-groups.
type overflow struct{ groups *distinct.Counter }

func (o *overflow) add(group string) {
	if o.groups == nil {
		o.groups = distinct.New(maxOverflowNames, 0)
	}
	o.groups.Add(group)
}

func (o *overflow) rows() int64 {
	if o.groups == nil {
		return 0
	}
	return o.groups.Occurrences()
}

// otherLine is the output line of the groups beyond --max-groups.
type otherLine struct {
	File  string      `json:"file"`
	Other otherGroups `json:"other"`
}

type otherGroups struct {
	// Groups is the number of distinct groups beyond the cap (a lower bound
	// when GroupsExact is false), Rows their rows; none was analysed.
	Groups      int   `json:"groups"`
	GroupsExact bool  `json:"groups_exact"`
	Rows        int64 `json:"rows"`
	MaxGroups   int   `json:"max_groups"`
}

func (o *overflow) report(maxGroups int) otherGroups {
	n, exact := o.groups.Distinct()
	return otherGroups{Groups: n, GroupsExact: exact, Rows: o.rows(), MaxGroups: maxGroups}
}

func (o *overflow) warning(maxGroups int) string {
	n, exact := o.groups.Distinct()
	at := ""
	if !exact {
		at = "at least "
	}
	return fmt.Sprintf("%s%d groups beyond --max-groups %d (%d rows) were not analysed; they are counted in the \"other\" line. "+
		"Raise --max-groups to analyse them (each group holds a detector: about 240 KiB allocated)",
		at, n, maxGroups, o.rows())
}

// quoteAll lists column names quoted, so that a name holding a comma, a
// quote or a line break reads unambiguously in a one-line message.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
