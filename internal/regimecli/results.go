package regimecli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

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
	return []*cobra.Command{mergeCommand(gs), reportCommand(gs), compareCommand(gs), gateCommand(gs), historyCommand(gs), profileCommand(gs)}
}

// historyHelp is the help of `k6 x regime history`.
const historyHelp = `Writes one row per run of the same script (each RESULTS_DIR a run folder, or
a folder of run folders such as results/), in run start order, as the CSV
that Apache Otava's CSV data source reads: the columns time, label, run_id
and dir, then per scenario S the settled view's S.steady_p50_ms,
S.steady_p95_ms, S.steady_p99_ms, S.steady_error_rate and S.ttss_ms, the
online S.online_ttss_ms, the cold-start cost S.cold_start_ms and
S.cold_excess_ms, and S.relapses; per endpoint E of a settled view (scope
'endpoint') S[E].steady_p50_ms ... S[E].ttss_ms. A column no run has is left
out. examples/otava/otava.yaml is a configuration for it.

label is summary.json's extra[--label-key] (saveResults({extra: {commit}})),
else the run's testid. Otava's CSV reader refuses empty cells, so a run
that lacks a figure (no settled steady state) is left out and named on
stderr, unless --keep-missing; so is a run that did not complete, unless
--keep-incomplete.
Exit status: 0 written; 2 bad arguments, an unreadable folder, runs of
different scripts (told apart by their scenarios, named: summary.json
records no more of the script), or no run left to write.`

func historyCommand(gs *state.GlobalState) *cobra.Command {
	var out string
	var o results.HistoryOptions
	cmd := &cobra.Command{
		Use:           "history RESULTS_DIR... [--out FILE]",
		Short:         "Write the run history of repeated runs as a CSV for Apache Otava",
		Long:          historyHelp,
		Args:          troubleArgs(cobra.MinimumNArgs(1)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(_ *cobra.Command, args []string) error { return writeHistory(gs, args, out, o) },
	}
	cmd.Flags().StringVar(&out, "out", "", "write the CSV to this file (replaced whole; default standard output)")
	cmd.Flags().StringVar(&o.LabelKey, "label-key", "commit", "summary.json extra key that labels a run")
	cmd.Flags().BoolVar(&o.KeepMissing, "keep-missing", false, "write runs that lack a figure, with empty cells")
	cmd.Flags().BoolVar(&o.KeepIncomplete, "keep-incomplete", false, "write runs that did not complete")
	return cmd
}

// profileHelp is the help of `k6 x regime profile`.
const profileHelp = `Learns a profile from the results folders of repeated runs of the same script
and load (each RESULTS_DIR a run folder, or a folder of run folders), per
scenario and per endpoint with a detector of its own (scope 'endpoint'):
the curve of the detector windows' block medians and tails (1-s blocks,
wider for runs over 5 minutes) averaged over the runs (the median of the
runs' values per block, with the least and the greatest), where the warm-up
ends (the runs' settled boundaries: median and spread; and where the averaged
curve settles, MSER's truncation point of it), the steady envelope
(how far steady block medians and tails wander from their run's level, 5th
to 95th percentile over the runs, and how far the runs' levels differ),
and the distributions of TTSS, cold-start cost and settled steady p50 and
p99, and each scenario's iteration rate (the load it was learnt at). Warm-up repeats at the
start of every run and the machine's waves do not, so the average shows
the one and the envelope measures the other (Welch's procedure).

Writes --out (profile.json, schema 1) and --svg (default: --out with .svg):
every run's curve faint, the average bold, the warm-up ends and the steady
envelope shaded. Both are written whole or not at all.
Refused, with the reason: fewer than 3 runs, runs of different scripts
(told apart by their scenarios, named: a script changed in other ways
that keeps its scenarios and load is not told apart), of another load (a
scenario's iteration rate more than --rate-tolerance from the runs'
median, named), runs whose durations differ by more than
--duration-tolerance, runs that did not complete, folders without
windows.csv or with thinned windows.
A run reads it with regime.configure(options, { profile: 'profile.json' })
or K6_REGIME_PROFILE: its detectors take the warm-up end and steady level
as a prior, and its settled figures are set against the profile's runs at
its end (regime_profile_* metrics; thresholds/ profiled()); compare
--profile does the same for a finished run.
Exit status: 0 written; 2 refused input or output.`

func profileCommand(gs *state.GlobalState) *cobra.Command {
	var out, svg string
	var o results.ProfileOptions
	cmd := &cobra.Command{
		Use:           "profile RESULTS_DIR... --out profile.json [--svg profile.svg]",
		Short:         "Learn what repeated runs of one script and load agree on: the warm-up and the steady noise",
		Long:          profileHelp,
		Args:          troubleArgs(cobra.MinimumNArgs(1)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(_ *cobra.Command, args []string) error { return writeProfile(gs, args, out, svg, o) },
	}
	cmd.Flags().StringVar(&out, "out", "", "write profile.json here (replaced whole)")
	cmd.Flags().StringVar(&svg, "svg", "", "write the picture here (default: --out with .svg)")
	cmd.Flags().StringVar(&o.LabelKey, "label-key", "commit", "summary.json extra key that labels a run")
	cmd.Flags().Float64Var(&o.RateTolerance, "rate-tolerance", results.ProfileRateTolerance,
		"refuse runs whose scenario iteration rate is further than this from the runs' median (relative; 0: no check)")
	cmd.Flags().Float64Var(&o.DurationTolerance, "duration-tolerance", results.ProfileDurationTolerance,
		"refuse runs the longest of which lasted more than this beyond the shortest (relative; 0: no check)")
	return cmd
}

// rename is os.Rename; a unit test fails it to check writeFilesAtomic's undo.
var rename = os.Rename

// writeFilesAtomic writes every file to a temporary one beside it, then
// renames them all into place: none is written half, and none is left
// written when another could not be: a file that was there before keeps a
// second link, put back if a later rename fails (the path is replaced in
// one rename, never missing). A path that is a folder is refused before
// anything is written.
func writeFilesAtomic(files map[string][]byte) error {
	paths := make([]string, 0, len(files))
	for path := range files {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return fmt.Errorf("%s is a folder; give a file name", path)
		}
		paths = append(paths, path)
	}
	sort.Strings(paths)
	tmps := map[string]string{}
	defer func() {
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}()
	for _, path := range paths {
		f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
		if err != nil {
			// name the path asked for, not the hidden temporary file
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		tmps[path] = f.Name()
		if _, err := f.Write(files[path]); err != nil {
			_ = f.Close()
			return err
		}
		// on disk before it replaces anything: a crash after the rename
		// must not leave an empty file at the path
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Chmod(f.Name(), 0o644); err != nil {
			return err
		}
	}
	// placed: the paths renamed into place so far, with where the file that
	// was there before went ("" if there was none)
	type placedFile struct{ path, old string }
	var placed []placedFile
	undo := func() {
		for i := len(placed) - 1; i >= 0; i-- {
			p := placed[i]
			if p.old != "" {
				_ = rename(p.old, p.path)
			} else {
				_ = os.Remove(p.path)
			}
		}
	}
	for _, path := range paths {
		// the file there before stays at its path (a second link to it is
		// the copy to put back): a reader never finds the path missing
		old := ""
		if _, err := os.Lstat(path); err == nil {
			old = tmps[path] + ".old"
			if err := os.Link(path, old); err != nil {
				undo()
				return fmt.Errorf("keeping %s to put it back if a later file fails: %w", path, err)
			}
		}
		if err := rename(tmps[path], path); err != nil {
			if old != "" {
				_ = os.Remove(old) // path still holds the file it held
			}
			undo()
			return err
		}
		delete(tmps, path)
		placed = append(placed, placedFile{path, old})
	}
	for _, p := range placed {
		if p.old != "" {
			_ = os.Remove(p.old)
		}
	}
	return nil
}

// runDataFile says whether path would replace a data file of a results
// folder (summary.json, the histograms, the series, windows.csv, k6's
// metrics, ...): a file anywhere inside a folder holding a summary.json,
// other than its report.html when report is set. It returns the folder.
func runDataFile(path string, report bool) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if isRunFolder(dir) {
			rel, _ := filepath.Rel(dir, abs)
			if report && strings.EqualFold(rel, results.ReportFile) {
				return "", false
			}
			return dir, true
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", false
		}
	}
}

// isRunFolder says whether dir is a results folder: a summary.json of
// this project's (its schema and run_id), not any summary.json (k6's
// --summary-export and handleSummary files are often called so).
func isRunFolder(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err != nil {
		return false
	}
	var head struct {
		Schema *int    `json:"schema"`
		RunID  *string `json:"run_id"`
	}
	return json.Unmarshal(b, &head) == nil && head.Schema != nil && head.RunID != nil
}

// sameFile says whether two output paths name one file (their cleaned
// absolute paths, or the same existing file).
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == bb {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// runFolders expands the arguments of history: a folder with a
// summary.json is a run; any other folder stands for the run folders in it.
func runFolders(args []string) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) error {
		abs, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		if seen[abs] {
			return fmt.Errorf("%s given twice", d)
		}
		seen[abs] = true
		dirs = append(dirs, d)
		return nil
	}
	for _, a := range args {
		info, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("%s is not a folder", a)
		}
		if _, err := os.Stat(filepath.Join(a, results.SummaryFile)); err == nil {
			if err := add(a); err != nil {
				return nil, err
			}
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue // a folder being written (.partial-*), or left by a crash
			}
			sub := filepath.Join(a, e.Name())
			if _, err := os.Stat(filepath.Join(sub, results.SummaryFile)); e.IsDir() && err == nil {
				if err := add(sub); err != nil {
					return nil, err
				}
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s holds no %s, nor do its folders", a, results.SummaryFile)
		}
	}
	return dirs, nil
}

// sameRuns refuses two folders that hold the same run (a copied folder, or
// a symbolic link under another name): counted twice, it would pass for
// one more run of a profile or a history.
func sameRuns(sums []*results.Summary, dirs []string) error {
	seen := map[string]string{}
	for i, s := range sums {
		if s.RunID == "" {
			continue
		}
		if first, ok := seen[s.RunID]; ok {
			return fmt.Errorf("%s and %s hold the same run (run_id %s): a copy of a folder, a link to it, or a merged folder "+
				"(it keeps its first instance's run id) beside its sources; give each run once", first, dirs[i], s.RunID)
		}
		seen[s.RunID] = dirs[i]
	}
	return nil
}

// exitSettledGateFailed is gate's failed verdict: k6's own status for
// crossed thresholds, since gate re-judges what thresholds judged.
const exitSettledGateFailed = 99

func gateCommand(gs *state.GlobalState) *cobra.Command {
	var budget, scenarios []string
	var endpoint string
	var allowIncomplete bool
	cmd := &cobra.Command{
		Use:   "gate RESULTS_DIR --budget BUDGETS [--scenario NAME]... [--endpoint NAME]",
		Short: "Judge a results folder's settled steady state against budgets (exit 99 on failure)",
		Long: `Re-judges a results folder offline on its settled view (the whole run
re-segmented at its end: summary.json's scenarios.<name>.settled): every
scenario's iterations, or those of the scenarios named by --scenario
(repeatable: the load's scenarios, not a probe or a ramp that is not meant
to settle), or with one --scenario and --endpoint that endpoint's requests
(scope 'endpoint').

--budget: METRIC OP VALUE, comma-separated, OP one of < <= > >=; metrics
p50, p90, p95, p99, max, mean (durations: 300ms, 1.5s; a bare number is ms),
error_rate (0.01 or 1%), ttss. E.g. --budget 'p95<300ms,error_rate<1%,ttss<20s'.
--budget may be repeated: every budget given is judged.
A judged view without a settled steady state fails: nothing passes on no
data. A view of a run cut short (interrupted, aborted) fails too, unless
--allow-incomplete: then it is judged and marked partial.
Exit status: 0 every budget held; 99 a budget failed or a view has no settled
steady state; 2 bad flags or budgets, a missing or unreadable folder, an
unknown scenario or endpoint, a summary written before the settled view.`,
		Args:          troubleArgs(cobra.ExactArgs(1)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			rules, err := results.ParseLimits(strings.Join(budget, ","))
			if err != nil {
				return troubleError(err)
			}
			s, err := results.ReadSummary(args[0])
			if err != nil {
				return troubleError(fmt.Errorf("gate: %w", err))
			}
			g, err := results.JudgeSettled(s, rules, scenarios, endpoint)
			if err != nil {
				return troubleError(fmt.Errorf("gate: %s: %w", args[0], err))
			}
			g.AllowPartial = allowIncomplete
			fmt.Fprint(gs.Stdout, g.Text())
			if !g.Passed() {
				return cliexit.With(errors.New("gate: the settled steady state did not meet the budgets"), exitSettledGateFailed)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&budget, "budget", nil, "budgets, e.g. 'p95<300ms,p99<1s,error_rate<1%,ttss<20s' (repeatable)")
	cmd.Flags().StringArrayVar(&scenarios, "scenario", nil, "judge this scenario only (repeatable)")
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "with one --scenario: judge this endpoint's settled view")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete", false,
		"judge the settled view of a run cut short (interrupted, aborted) instead of failing it")
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
			if dir, ok := runDataFile(out, true); ok {
				return troubleError(fmt.Errorf("report: --out %s lies inside the results folder %s, where only its report.html may be written; give another path", out, dir))
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

// compareHelp is the help of `k6 x regime compare`.
const compareHelp = `Compares the steady-state figures of two results folders: per phase x endpoint
p95 / p99 / error rate of steady requests, per scenario steady iteration
p95 / p99, TTSS and cold-start cost, as a before/after table.

--fail-on gives budgets the candidate may exceed the base by. Forms:
METRIC=+N% (relative to the base) or METRIC=+N (absolute: ms, or a fraction
for errors), comma-separated, e.g. --fail-on p95=+10%,errors=+0.01,ttss=+20%;
--fail-on may be repeated: every budget given is judged.
Metrics: p50, p90, p95, p99, p99_9, errors, ttss, cold_start, cold_excess,
and the settled view's settled_p50, settled_p95, settled_p99, settled_ttss.
A budget never passes on missing data: a budgeted figure the candidate lacks
(a scenario or endpoint missing, steady state never reached) fails, and so
does a budget that finds no figure in both runs. --scenario (repeatable)
keeps the scenarios named only: the load's, not a probe of 1 request/s or a
ramp that is not meant to settle, which have no steady figures to judge.

With --profile (a profile.json of k6 x regime profile), RUN_DIR's settled
view is set against the profile's runs instead, per scenario and endpoint:
TTSS against the p90 of their TTSS, steady p50 and p99 against the median of
theirs, each line naming the figure, the profile's value and the run's, as a
run with regime.configure's profile setting logs them at its end. --fail-on
then takes ttss, p50 and p99 (relative to the profile's value, or absolute
in ms); a figure without a budget fails beyond the largest one of the
profile's own runs. A figure the run lacks fails.

A base run that did not complete (interrupted, aborted, timed out) is refused
unless --allow-incomplete-base is given; a candidate that did not complete
fails (exit 1) unless --allow-incomplete-candidate is given.
Exit status: 0 no budget failed; 1 a budget was exceeded or could not be
judged (each reason printed; with --profile also a run of another load: a
scenario's iteration rate more than 20% from the profile's); 2 bad flags or
arguments, an unreadable or invalid folder or profile, or a refused base.`

func compareCommand(gs *state.GlobalState) *cobra.Command {
	var failOn, scenarios []string
	var profile string
	var allowIncomplete, allowIncompleteCand bool
	cmd := &cobra.Command{
		Use:   "compare BASE_DIR CANDIDATE_DIR [--fail-on BUDGETS] [--scenario NAME]... | compare --profile profile.json RUN_DIR [--fail-on BUDGETS]",
		Short: "Compare two runs' steady-state figures, or a run with a profile; fail CI on budgets",
		Long:  compareHelp,
		Args: troubleArgs(func(cmd *cobra.Command, args []string) error {
			if profile != "" {
				if len(args) != 1 {
					return fmt.Errorf("compare --profile profile.json takes one RUN_DIR, got %d", len(args))
				}
				return nil
			}
			if len(args) != 2 {
				return fmt.Errorf("compare takes BASE_DIR CANDIDATE_DIR (or --profile profile.json RUN_DIR), got %d folder(s)", len(args))
			}
			return nil
		}),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			budgets, err := results.ParseBudgets(strings.Join(failOn, ","))
			if err != nil {
				return troubleError(err)
			}
			if profile != "" {
				if allowIncomplete {
					return troubleError(errors.New("compare: --allow-incomplete-base has no base to allow with --profile (the profile's runs are the base)"))
				}
				if len(scenarios) > 0 {
					return troubleError(errors.New("compare: --scenario judges two runs; with --profile every scenario of the profile is judged"))
				}
				return compareProfile(gs, profile, args[0], budgets, allowIncompleteCand)
			}
			return compareRuns(gs, args[0], args[1], budgets, allowIncomplete, allowIncompleteCand, scenarios)
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "", "set RUN_DIR against this profile.json instead of a base run")
	cmd.Flags().StringArrayVar(&failOn, "fail-on", nil, "budgets, e.g. p95=+10%,errors=+0.01,ttss=+20% (repeatable)")
	cmd.Flags().StringArrayVar(&scenarios, "scenario", nil,
		"compare this scenario only (repeatable: the load's scenarios, not a probe or a ramp that is not meant to settle)")
	cmd.Flags().BoolVar(&allowIncompleteCand, "allow-incomplete-candidate", false,
		"judge a candidate run that did not complete (interrupted, aborted, timed out) instead of failing it")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete-base", false,
		"compare against a base run that did not complete (interrupted, aborted, timed out)")
	return cmd
}

// compareProfile sets a finished run against a profile (compare --profile).
func compareProfile(gs *state.GlobalState, path, dir string, budgets []results.Budget, allowIncomplete bool) error {
	p, err := results.LoadProfile(path)
	if err != nil {
		return troubleError(fmt.Errorf("compare: %w", err))
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		return troubleError(fmt.Errorf("compare: %w", err))
	}
	checks, err := p.CheckRun(s)
	if err != nil {
		return troubleError(fmt.Errorf("compare: %s: %w", dir, err))
	}
	// the run's load against the profile's (windows.csv gives the span)
	w, err := results.ReadWindows(dir)
	if err != nil {
		return troubleError(fmt.Errorf("compare: %w", err))
	}
	if len(p.RatesPerS) > 0 && len(w) == 0 {
		fmt.Fprintf(gs.Stderr, "compare: %s has no windows.csv: its load is not checked against the profile's\n", dir)
	}
	failures, err := results.ProfileFailures(checks, budgets)
	if err != nil {
		return troubleError(fmt.Errorf("compare: %w", err))
	}
	// a run of another load fails: its checks compare unlike runs (and in
	// a closed model the rate is the service's own doing: a slower service
	// runs fewer iterations)
	rates := results.ScenarioRates(s, w)
	for _, name := range slices.Sorted(maps.Keys(rates)) {
		if err := p.CheckLoad(name, rates[name], results.ProfileRateTolerance); err != nil {
			failures = append(failures, strings.TrimPrefix(err.Error(), "profile: "))
		}
	}
	fmt.Fprintf(gs.Stdout, "%s against the profile %s (%d runs):\n", dir, path, len(p.Runs))
	if !s.Completed() {
		if allowIncomplete {
			// judged all the same: its figures are those of what it ran
			fmt.Fprintln(gs.Stdout, "NOTE: the run did not complete: "+s.EndText())
		} else {
			failures = append(failures, "the run did not complete ("+s.EndText()+"): a run cut short did not run the whole load; "+
				"--allow-incomplete-candidate judges what it ran")
		}
	}
	for _, c := range checks {
		fmt.Fprintln(gs.Stdout, "  "+c.Text())
	}
	for _, f := range failures {
		fmt.Fprintln(gs.Stdout, "FAILED "+f)
	}
	if len(failures) > 0 {
		return cliexit.With(fmt.Errorf("compare: %d profile check(s) failed", len(failures)), exitGateFailed)
	}
	return nil
}

// writeHistory writes the history of the runs in args (k6 x regime history).
func writeHistory(gs *state.GlobalState, args []string, out string, o results.HistoryOptions) error {
	dirs, err := runFolders(args)
	if err != nil {
		return troubleError(fmt.Errorf("history: %w", err))
	}
	sums := make([]*results.Summary, len(dirs))
	for i, d := range dirs {
		if sums[i], err = results.ReadSummary(d); err != nil {
			return troubleError(fmt.Errorf("history: %w", err))
		}
	}
	if err := sameRuns(sums, dirs); err != nil {
		return troubleError(fmt.Errorf("history: %w", err))
	}
	h, err := results.BuildHistory(sums, dirs, o)
	if err != nil {
		return troubleError(err)
	}
	if note := results.SchemaNote(sums, dirs); note != "" {
		fmt.Fprintf(gs.Stderr, "history: %s\n", note)
	}
	for _, d := range h.Dropped {
		fmt.Fprintf(gs.Stderr, "history: left out the column %s\n", d)
	}
	for _, s := range h.Skipped {
		fmt.Fprintf(gs.Stderr, "history: left out %s\n", s)
	}
	if len(h.Rows) == 0 {
		return troubleError(fmt.Errorf("history: no run left to write (%d left out)", len(h.Skipped)))
	}
	b, err := h.CSV()
	if err != nil {
		return troubleError(fmt.Errorf("history: %w", err))
	}
	if out == "" {
		if _, err := gs.Stdout.Write(b); err != nil {
			return troubleError(fmt.Errorf("history: writing to stdout: %w", err))
		}
		return nil
	}
	if dir, ok := runDataFile(out, false); ok {
		return troubleError(fmt.Errorf("history: --out %s lies inside the results folder %s; give a path outside it", out, dir))
	}
	if err := writeFilesAtomic(map[string][]byte{out: b}); err != nil {
		return troubleError(fmt.Errorf("history: %w", err))
	}
	fmt.Fprintf(gs.Stderr, "history: %d runs, %d columns written to %s\n", len(h.Rows), len(h.Header), out)
	return nil
}

// writeProfile learns the profile of the runs in args and writes it to out
// and its picture to svg (k6 x regime profile).
func writeProfile(gs *state.GlobalState, args []string, out, svg string, o results.ProfileOptions) error {
	if out == "" {
		return troubleError(errors.New("profile: --out FILE is required"))
	}
	if !(o.RateTolerance >= 0) || math.IsInf(o.RateTolerance, 1) {
		return troubleError(fmt.Errorf("profile: --rate-tolerance must be a finite share >= 0 (0.2: 20%%; 0: no check), got %g", o.RateTolerance))
	}
	if !(o.DurationTolerance >= 0) || math.IsInf(o.DurationTolerance, 1) {
		return troubleError(fmt.Errorf("profile: --duration-tolerance must be a finite share >= 0 (0.2: 20%%; 0: no check), got %g", o.DurationTolerance))
	}
	if svg == "" {
		svg = strings.TrimSuffix(out, filepath.Ext(out)) + ".svg"
	}
	if sameFile(svg, out) {
		return troubleError(fmt.Errorf("profile: --svg %s and --out %s are the same file", svg, out))
	}
	for flag, p := range map[string]string{"--out": out, "--svg": svg} {
		if dir, ok := runDataFile(p, false); ok {
			return troubleError(fmt.Errorf("profile: %s %s lies inside the results folder %s; give a path outside it", flag, p, dir))
		}
	}
	dirs, err := runFolders(args)
	if err != nil {
		return troubleError(fmt.Errorf("profile: %w", err))
	}
	in := make([]results.ProfileInput, len(dirs))
	for i, d := range dirs {
		s, err := results.ReadSummary(d)
		if err != nil {
			return troubleError(fmt.Errorf("profile: %w", err))
		}
		w, err := results.ReadWindows(d)
		if err != nil {
			return troubleError(fmt.Errorf("profile: %w", err))
		}
		in[i] = results.ProfileInput{Summary: s, Windows: w, Dir: d}
	}
	sums := make([]*results.Summary, len(in))
	for i := range in {
		sums[i] = in[i].Summary
	}
	if err := sameRuns(sums, dirs); err != nil {
		return troubleError(fmt.Errorf("profile: %w", err))
	}
	p, err := results.BuildProfile(in, o)
	if err != nil {
		return troubleError(err)
	}
	if note := results.SchemaNote(sums, dirs); note != "" {
		fmt.Fprintf(gs.Stderr, "profile: %s\n", note)
	}
	p.Rounded()
	js, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return troubleError(fmt.Errorf("profile: %w", err))
	}
	if err := writeFilesAtomic(map[string][]byte{out: append(js, '\n'), svg: []byte(p.SVG())}); err != nil {
		return troubleError(fmt.Errorf("profile: %w", err))
	}
	fmt.Fprint(gs.Stdout, p.Text())
	fmt.Fprintf(gs.Stdout, "wrote %s (%d bytes) and %s\n", out, len(js)+1, svg)
	return nil
}

// compareRuns compares the run in candDir with the one in baseDir (k6 x
// regime compare BASE CANDIDATE).
func compareRuns(gs *state.GlobalState, baseDir, candDir string, budgets []results.Budget, allowIncomplete, allowIncompleteCand bool, scenarios []string) error {
	base, err := results.ReadSummary(baseDir)
	if err != nil {
		return troubleError(fmt.Errorf("compare: base: %w", err))
	}
	cand, err := results.ReadSummary(candDir)
	if err != nil {
		return troubleError(fmt.Errorf("compare: candidate: %w", err))
	}
	if len(scenarios) > 0 {
		for _, n := range scenarios {
			if base.Scenarios[n] == nil && cand.Scenarios[n] == nil {
				all := slices.Compact(slices.Sorted(slices.Values(append(base.SortedScenarios(), cand.SortedScenarios()...))))
				return troubleError(fmt.Errorf("compare: --scenario: no scenario %q in either run; scenarios: %s", n, strings.Join(all, ", ")))
			}
		}
		base, cand = base.OnlyScenarios(scenarios), cand.OnlyScenarios(scenarios)
	}
	if note := results.SchemaNote([]*results.Summary{base, cand}, []string{baseDir, candDir}); note != "" {
		fmt.Fprintf(gs.Stderr, "compare: %s\n", note)
	}
	if err := results.CheckBaseline(base); err != nil && !allowIncomplete {
		return troubleError(fmt.Errorf("compare: %s: %w; give --allow-incomplete-base to compare against it anyway", baseDir, err))
	}
	c := results.Compare(base, cand, budgets)
	if !cand.Completed() && !allowIncompleteCand {
		// a candidate cut short did not run the whole load: no release passes on it
		c.Failures = append(c.Failures, fmt.Sprintf("the candidate run did not complete (%s): a run cut short did not run the whole load; "+
			"--allow-incomplete-candidate judges what it ran", cand.EndText()))
	}
	fmt.Fprint(gs.Stdout, c.Text(baseDir, candDir))
	if c.Failed() {
		return cliexit.With(fmt.Errorf("compare: %d budget check(s) failed", len(c.Failures)), exitGateFailed)
	}
	return nil
}
