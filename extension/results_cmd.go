package extension

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/xk6-regime/xk6-regime/internal/results"
	"go.k6.io/k6/v2/cmd/state"
)

// errBudgetExceeded makes compare exit non-zero when a --fail-on budget is exceeded.
var errBudgetExceeded = errors.New("compare: budget exceeded")

// resultsCommands are the `k6 x regime` commands on results folders:
// merge, report and compare.
func resultsCommands(gs *state.GlobalState) []*cobra.Command {
	return []*cobra.Command{mergeCommand(gs), reportCommand(gs), compareCommand(gs)}
}

func mergeCommand(gs *state.GlobalState) *cobra.Command {
	var out string
	var noReport bool
	cmd := &cobra.Command{
		Use:   "merge RUN_DIR... --out DIR",
		Short: "Merge the results folders of several k6 instances of one test",
		Long: `Merges the results folders written by several k6 instances of one test
(execution segments, or the pods of a distributed run) into one folder:
HDR histograms are merged and counts summed, so per-regime counts and
percentiles are those of the whole test (within HDR precision). TTSS and the
boundaries are the latest over the instances, classes the worst.`,
		Args:          cobra.MinimumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("merge: --out DIR is required")
			}
			runs := make([]*results.Run, 0, len(args))
			for _, dir := range args {
				r, err := results.LoadDir(dir)
				if err != nil {
					return fmt.Errorf("merge: %w", err)
				}
				runs = append(runs, r)
			}
			merged, err := results.Merge(runs, args)
			if err != nil {
				return err
			}
			if err := merged.WriteDir(out, results.WriteOptions{Report: !noReport}); err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			fmt.Fprintf(gs.Stdout, "merged %d results folders (%d instances) into %s\n", len(args), merged.Summary.Instances, out)
			fmt.Fprint(gs.Stdout, results.TextTable(merged.Summary))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder to write the merged results to (created)")
	cmd.Flags().BoolVar(&noReport, "no-report", false, "do not write report.html")
	return cmd
}

func reportCommand(gs *state.GlobalState) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:           "report RUN_DIR",
		Short:         "Rebuild report.html from a results folder",
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := results.LoadDir(args[0])
			if err != nil {
				return fmt.Errorf("report: %w", err)
			}
			if out == "" {
				out = filepath.Join(args[0], results.ReportFile)
			}
			if err := r.WriteReport(out); err != nil {
				return err
			}
			fmt.Fprintf(gs.Stdout, "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write (default RUN_DIR/report.html)")
	return cmd
}

func compareCommand(gs *state.GlobalState) *cobra.Command {
	var failOn string
	cmd := &cobra.Command{
		Use:   "compare BASE_DIR CANDIDATE_DIR [--fail-on BUDGETS]",
		Short: "Compare two runs' steady-state figures; fail CI on budgets",
		Long: `Compares the steady-state figures of two results folders: per phase x endpoint
p95 / p99 / error rate of steady requests, per scenario steady iteration
p95 / p99, TTSS and cold-start cost, as a before/after table.

--fail-on gives budgets the candidate may exceed the base by; when one is
exceeded the command exits non-zero. Forms: METRIC=+N% (relative to the
base) or METRIC=+N (absolute: ms, or a fraction for errors), comma-separated,
e.g. --fail-on p95=+10%,errors=+0.01,ttss=+20%.
Metrics: p50, p90, p95, p99, p99_9, errors, ttss, cold_start, cold_excess.`,
		Args:          cobra.ExactArgs(2),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			budgets, err := results.ParseBudgets(failOn)
			if err != nil {
				return err
			}
			base, err := results.ReadSummary(args[0])
			if err != nil {
				return fmt.Errorf("compare: base: %w", err)
			}
			cand, err := results.ReadSummary(args[1])
			if err != nil {
				return fmt.Errorf("compare: candidate: %w", err)
			}
			c := results.Compare(base, cand, budgets)
			fmt.Fprint(gs.Stdout, c.Text(args[0], args[1]))
			if c.Failed() {
				return errBudgetExceeded
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&failOn, "fail-on", "", "budgets, e.g. p95=+10%,errors=+0.01,ttss=+20%")
	return cmd
}
