package extension

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/xk6-regime/xk6-regime/internal/results"
	"go.k6.io/k6/v2/cmd/state"

	"github.com/xk6-regime/xk6-regime/internal/cliexit"
)

// Exit statuses of `k6 x regime compare`, `merge` and `report` (as diff's:
// 1 is the verdict, 2 is trouble).
const (
	exitGateFailed = 1             // compare: a budget was exceeded or could not be judged
	exitTrouble    = cliexit.Usage // bad flags or arguments, unreadable or invalid input, refused output
)

// troubleError marks err with exit status 2.
func troubleError(err error) error { return cliexit.With(err, exitTrouble) }

// troubleArgs makes a cobra argument check's error exit with status 2.
func troubleArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return cliexit.Args(check, exitTrouble)
}

// resultsCommands are the `k6 x regime` commands on results folders:
// merge, report and compare.
func resultsCommands(gs *state.GlobalState) []*cobra.Command {
	return []*cobra.Command{mergeCommand(gs), reportCommand(gs), compareCommand(gs), gateCommand(gs)}
}

// exitSettledGateFailed is gate's failed verdict: k6's own status for
// crossed thresholds, since gate re-judges what thresholds judged.
const exitSettledGateFailed = 99

func gateCommand(gs *state.GlobalState) *cobra.Command {
	var budget, scenario, endpoint string
	cmd := &cobra.Command{
		Use:   "gate RESULTS_DIR --budget BUDGETS [--scenario NAME [--endpoint NAME]]",
		Short: "Judge a results folder's settled steady state against budgets (exit 99 on failure)",
		Long: `Re-judges a results folder offline on its settled view (the whole run
re-segmented at its end: summary.json's scenarios.<name>.settled): every
scenario's iterations, or --scenario's, or with --endpoint that endpoint's
requests (scope 'endpoint').

--budget: METRIC OP VALUE, comma-separated, OP one of < <= > >=; metrics
p50, p90, p95, p99, max, mean (durations: 300ms, 1.5s; a bare number is ms),
error_rate (0.01 or 1%), ttss. E.g. --budget 'p95<300ms,error_rate<1%,ttss<20s'.
A judged view without a settled steady state fails: nothing passes on no
data. A view of a run cut short is judged and marked partial.
Exit status: 0 every budget held; 99 a budget failed or a view has no settled
steady state; 2 bad flags or budgets, a missing or unreadable folder, an
unknown scenario or endpoint, a summary written before the settled view.`,
		Args:          troubleArgs(cobra.ExactArgs(1)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			rules, err := results.ParseLimits(budget)
			if err != nil {
				return troubleError(err)
			}
			s, err := results.ReadSummary(args[0])
			if err != nil {
				return troubleError(fmt.Errorf("gate: %w", err))
			}
			g, err := results.JudgeSettled(s, rules, scenario, endpoint)
			if err != nil {
				return troubleError(fmt.Errorf("gate: %s: %w", args[0], err))
			}
			fmt.Fprint(gs.Stdout, g.Text())
			if !g.Passed() {
				return cliexit.With(errors.New("gate: the settled steady state did not meet the budgets"), exitSettledGateFailed)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&budget, "budget", "", "budgets, e.g. 'p95<300ms,p99<1s,error_rate<1%,ttss<20s'")
	cmd.Flags().StringVar(&scenario, "scenario", "", "judge this scenario only")
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "with --scenario: judge this endpoint's settled view")
	return cmd
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
boundaries are the latest over the instances, classes the worst.

The output folder must not exist: merge never overwrites (its inputs least of
all), and refuses a folder given twice. It writes into a hidden temporary
folder beside --out and renames it into place when complete.
Exit status: 0 merged; 2 bad arguments, unreadable or invalid input, or a
refused output.`,
		Args:          troubleArgs(cobra.MinimumNArgs(1)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if out == "" {
				return troubleError(errors.New("merge: --out DIR is required"))
			}
			if err := results.CheckMergePaths(args, out); err != nil {
				return troubleError(fmt.Errorf("merge: %w", err))
			}
			runs := make([]*results.Run, 0, len(args))
			for _, dir := range args {
				r, err := results.LoadDir(dir)
				if err != nil {
					return troubleError(fmt.Errorf("merge: %w", err))
				}
				runs = append(runs, r)
			}
			merged, err := results.Merge(runs, args)
			if err != nil {
				return troubleError(err)
			}
			if err := merged.WriteNew(out, results.WriteOptions{Report: !noReport}, nil); err != nil {
				return troubleError(fmt.Errorf("merge: %w", err))
			}
			fmt.Fprintf(gs.Stdout, "merged %d results folders (%d instances) into %s\n", len(args), merged.Summary.Instances, out)
			fmt.Fprint(gs.Stdout, results.TextTable(merged.Summary))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder to write the merged results to (must not exist)")
	cmd.Flags().BoolVar(&noReport, "no-report", false, "do not write report.html")
	return cmd
}

func reportCommand(gs *state.GlobalState) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Rebuild report.html from a results folder",
		Long: `Rebuilds report.html from a results folder (or writes it to --out), replacing
the file atomically. Exit status: 0 written; 2 bad arguments, an unreadable or
invalid folder, or an --out that names one of the folder's data files.`,
		Args:          troubleArgs(cobra.ExactArgs(1)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if out == "" {
				out = filepath.Join(args[0], results.ReportFile)
			}
			if fi, err := os.Stat(out); err == nil && fi.IsDir() {
				return troubleError(fmt.Errorf("report: --out %s is a folder; give a file name", out))
			}
			if base := filepath.Base(out); base != results.ReportFile && results.ReservedName(base) {
				return troubleError(fmt.Errorf("report: --out %s would replace a results folder's data file; give another name", out))
			}
			r, err := results.LoadDir(args[0])
			if err != nil {
				return troubleError(fmt.Errorf("report: %w", err))
			}
			if err := r.WriteReport(out); err != nil {
				return troubleError(err)
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
	var allowIncomplete bool
	cmd := &cobra.Command{
		Use:   "compare BASE_DIR CANDIDATE_DIR [--fail-on BUDGETS]",
		Short: "Compare two runs' steady-state figures; fail CI on budgets",
		Long: `Compares the steady-state figures of two results folders: per phase x endpoint
p95 / p99 / error rate of steady requests, per scenario steady iteration
p95 / p99, TTSS and cold-start cost, as a before/after table.

--fail-on gives budgets the candidate may exceed the base by. Forms:
METRIC=+N% (relative to the base) or METRIC=+N (absolute: ms, or a fraction
for errors), comma-separated, e.g. --fail-on p95=+10%,errors=+0.01,ttss=+20%.
Metrics: p50, p90, p95, p99, p99_9, errors, ttss, cold_start, cold_excess,
and the settled view's settled_p50, settled_p95, settled_p99, settled_ttss.
A budget never passes on missing data: a budgeted figure the candidate lacks
(a scenario or endpoint missing, steady state never reached) fails, and so
does a budget that finds no figure in both runs.

A base run that did not complete (interrupted, aborted, timed out) is refused
unless --allow-incomplete-base is given.
Exit status: 0 no budget failed; 1 a budget was exceeded or could not be
judged (each reason printed); 2 bad flags or arguments, an unreadable or
invalid folder, or a refused base.`,
		Args:          troubleArgs(cobra.ExactArgs(2)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			budgets, err := results.ParseBudgets(failOn)
			if err != nil {
				return troubleError(err)
			}
			base, err := results.ReadSummary(args[0])
			if err != nil {
				return troubleError(fmt.Errorf("compare: base: %w", err))
			}
			cand, err := results.ReadSummary(args[1])
			if err != nil {
				return troubleError(fmt.Errorf("compare: candidate: %w", err))
			}
			if err := results.CheckBaseline(base); err != nil && !allowIncomplete {
				return troubleError(fmt.Errorf("compare: %s: %w; give --allow-incomplete-base to compare against it anyway", args[0], err))
			}
			c := results.Compare(base, cand, budgets)
			fmt.Fprint(gs.Stdout, c.Text(args[0], args[1]))
			if c.Failed() {
				return cliexit.With(fmt.Errorf("compare: %d budget check(s) failed", len(c.Failures)), exitGateFailed)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&failOn, "fail-on", "", "budgets, e.g. p95=+10%,errors=+0.01,ttss=+20%")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete-base", false,
		"compare against a base run that did not complete (interrupted, aborted, timed out)")
	return cmd
}
