// Command live is the live tag-quality harness (`make live`): it builds and
// starts real services on 127.0.0.1, drives each with the project's k6 in
// repeated runs, judges the regime tags against an offline reference of the
// whole run, and prints the figures per run and a table per case.
//
//	go run ./live/cmd/live [-cases all|short|heldout|unseen|long|NAME,...] [-runs 5] [-out DIR] [-k6 ./k6]
//
// Exit status: 0 when every must-show check passed on every run, 1 when one
// failed, 2 on bad usage or when a run gave nothing to judge (a service that
// did not start, a port in use, k6 without results).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/live/harness"
)

func main() {
	os.Exit(run())
}

func run() int {
	cases := flag.String("cases", "all", "cases to run: all, short, heldout, unseen (the last three held-out services, open and closed; in heldout and all), long (three cases at 5 minutes, not in all), or names separated by commas")
	runs := flag.Int("runs", 5, "repeated runs per case (1-50)")
	profiles := flag.String("profiles", "", "run each case with the profile DIR/<case>.json (case name with - for /; made by -profile, or by k6 x regime profile\n"+
		"from earlier runs of the case) as NAME+profile; -from with both batches' figures.json then judges both against the consensus of all their runs")
	firstRun := flag.Int("first-run", 1, "number of the first run (to add runs to an earlier batch: -from then reads both figures.json)")
	out := flag.String("out", "", "folder for the results and figures (default: .cache/live/<UTC time>)")
	k6 := flag.String("k6", "./k6", "the k6 binary with the extension")
	demo := flag.String("demo", "./bin/demo-service", "the demo service binary")
	from := flag.String("from", "", "run nothing: print the table of figures.json files (comma-separated) of earlier runs")
	rejudge := flag.Bool("rejudge", false, "with -from: judge the runs' results folders again (after a change of the reference)")
	withProfile := flag.Bool("profile", false, "after the runs of each case, learn a profile from them (k6 x regime profile) and run "+
		"the case as many times again with it (NAME+profile); both judged against the consensus of all the runs")
	replay := flag.String("replay", "", "with -from: judge instead the online tags a detector configuration (JSON, over the service preset, "+
		"as regime.configure's detector option) would have given on the recorded runs; implies -rejudge")
	loo := flag.Bool("loo-profile", false, "with -from: also replay each run of a case with the prior of a profile learnt (k6 x regime profile, -k6) "+
		"from the case's other runs in the files (leave one out; cases with 4 runs or more; a case whose runs k6 x regime profile refuses is left out), "+
		"judged as NAME+profile; implies -replay (the service preset unless -replay gives another), so the rows without a profile are replayed too")
	flag.BoolVar(&separateVariants, "separate", false, "judge a case's profiled runs (NAME+profile) against the consensus of their own runs, "+
		"and its runs without a profile against theirs, rather than both against the consensus of all the case's runs "+
		"(a reference independent of the runs a profile was learnt from); with -from it implies -rejudge")
	flag.Parse()
	if *runs < 1 || *runs > 50 {
		fmt.Fprintf(os.Stderr, "live: -runs must be 1..50, got %d\n", *runs)
		return 2
	}
	if *firstRun < 1 || *firstRun > 50 {
		fmt.Fprintf(os.Stderr, "live: -first-run must be 1..50, got %d\n", *firstRun)
		return 2
	}
	selected, err := harness.SelectCases(*cases)
	if err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	var replayCfg *detector.Config
	if *replay != "" {
		cfg := detector.ServiceConfig()
		dec := json.NewDecoder(strings.NewReader(*replay))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			fmt.Fprintln(os.Stderr, "live: -replay:", err)
			return 2
		}
		if errs := cfg.Validate(); len(errs) > 0 {
			fmt.Fprintln(os.Stderr, "live: -replay:", errors.Join(errs...))
			return 2
		}
		replayCfg = &cfg
	}
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if *from != "" {
		for _, name := range []string{"runs", "first-run", "profile", "profiles", "demo"} {
			if given[name] {
				fmt.Fprintf(os.Stderr, "live: -%s runs cases; -from runs nothing (it judges earlier runs)\n", name)
				return 2
			}
		}
		// without -cases, the cases the files hold, of every group
		if !given["cases"] {
			selected = harness.KnownCases()
		}
		if *out != "" {
			*out, _ = filepath.Abs(*out)
		}
		if *loo && replayCfg == nil {
			cfg := detector.ServiceConfig()
			replayCfg = &cfg
		}
		var looK6 string
		if *loo {
			looK6, _ = filepath.Abs(*k6)
		}
		return table(selected, strings.Split(*from, ","), *rejudge || replayCfg != nil || separateVariants, replayCfg, *out, looK6)
	}
	if *loo {
		fmt.Fprintln(os.Stderr, "live: -loo-profile needs -from")
		return 2
	}
	if *rejudge {
		fmt.Fprintln(os.Stderr, "live: -rejudge needs -from")
		return 2
	}
	if replayCfg != nil {
		fmt.Fprintln(os.Stderr, "live: -replay needs -from")
		return 2
	}
	if separateVariants && !*withProfile && *profiles == "" {
		fmt.Fprintln(os.Stderr, "live: -separate needs profiled runs: -profile or -profiles (or -from)")
		return 2
	}
	repo, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	if _, err := os.Stat(filepath.Join(repo, "live", "script.js")); err != nil {
		fmt.Fprintln(os.Stderr, "live: run it from the repository root (live/script.js not found)")
		return 2
	}
	if *out == "" {
		*out = filepath.Join(repo, ".cache", "live", time.Now().UTC().Format("20060102T150405Z"))
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	// k6 runs in the results folder: a relative -out would be taken from there
	*out = abs(*out)
	env := &harness.Env{K6: abs(*k6), Demo: abs(*demo), Repo: repo, Build: filepath.Join(repo, ".cache", "live", "build"),
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *profiles != "" {
		if *withProfile {
			fmt.Fprintln(os.Stderr, "live: -profiles and -profile exclude each other")
			return 2
		}
		for i, c := range selected {
			path := filepath.Join(abs(*profiles), profileFile(c))
			if _, err := os.Stat(path); err != nil {
				fmt.Fprintf(os.Stderr, "live: -profiles: case %s: %v\n", c.Name, err)
				return 2
			}
			selected[i] = c.WithProfile(path)
		}
	}
	var services []harness.Service
	for _, c := range selected {
		services = append(services, c.Service)
	}
	if err := env.Prepare(ctx, services); err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	// runs interleave the cases, so that a slow phase of the machine does
	// not fall on all runs of one case; each run is judged at once against
	// its single-run reference (progress), then every case against the
	// consensus of its runs
	var prelim []*harness.Figures
	outs := map[string]map[int]*harness.RunOutput{}
	runAll := func(cases []harness.Case) int {
		for r := *firstRun; r < *firstRun+*runs; r++ {
			for _, c := range cases {
				f, o, err := env.RunCase(ctx, c, r, filepath.Join(*out, "runs"))
				if err != nil {
					fmt.Fprintln(os.Stderr, "live:", err)
					return 2
				}
				fmt.Println("(single-run reference)", harness.RunLine(f))
				prelim = append(prelim, f)
				if outs[c.Name] == nil {
					outs[c.Name] = map[int]*harness.RunOutput{}
				}
				outs[c.Name][r] = o
				if err := writeJSON(filepath.Join(*out, "figures.json"), prelim); err != nil {
					fmt.Fprintln(os.Stderr, "live:", err)
					return 2
				}
			}
		}
		return 0
	}
	if code := runAll(selected); code != 0 {
		return code
	}
	if *withProfile {
		var profiled []harness.Case
		for _, c := range selected {
			var dirs []string
			for r := *firstRun; r < *firstRun+*runs; r++ {
				dirs = append(dirs, outs[c.Name][r].Dir)
			}
			path := filepath.Join(*out, "profiles", profileFile(c))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				fmt.Fprintln(os.Stderr, "live:", err)
				return 2
			}
			if err := env.BuildProfile(ctx, dirs, path); err != nil {
				fmt.Fprintf(os.Stderr, "live: %s: %v\n", c.Name, err)
				return 2
			}
			profiled = append(profiled, c.WithProfile(path))
		}
		if code := runAll(profiled); code != 0 {
			return code
		}
		selected = withVariants(selected, profiled)
	}
	figs, cons, err := judgeCases(selected, outs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	if err := writeJSON(filepath.Join(*out, "figures.json"), figs); err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	if err := writeJSON(filepath.Join(*out, "consensus.json"), cons); err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	fmt.Printf("\nfigures: %s\n", filepath.Join(*out, "figures.json"))
	return report(selected, figs, cons)
}

// profileFile names a case's profile in a folder of profiles.
func profileFile(c harness.Case) string {
	return strings.NewReplacer("/", "-").Replace(c.Name) + ".json"
}

// withVariants lists each case followed by its profiled variant.
func withVariants(cases, profiled []harness.Case) []harness.Case {
	var out []harness.Case
	for i, c := range cases {
		out = append(out, c, profiled[i])
	}
	return out
}

// separateVariants (-separate): a case's profiled runs are judged against
// the consensus of their own runs, not of all the case's runs.
var separateVariants bool

// judgeCases judges every case's runs against the consensus of its runs
// (or, with fewer than harness.ConsensusMinRuns, each against its own); a
// case's profiled variant (NAME+profile, right after it) shares its
// consensus.
func judgeCases(cases []harness.Case, outs map[string]map[int]*harness.RunOutput) ([]*harness.Figures, map[string]*harness.Consensus, error) {
	var figs []*harness.Figures
	cons := map[string]*harness.Consensus{}
	for i := 0; i < len(cases); i++ {
		c := cases[i]
		variants := []harness.Case{c}
		if !separateVariants && i+1 < len(cases) && cases[i+1].Name == c.Name+"+profile" {
			variants = append(variants, cases[i+1])
			i++
		}
		var vouts []map[int]*harness.RunOutput
		for _, v := range variants {
			vouts = append(vouts, outs[v.Name])
		}
		if len(vouts[0]) == 0 {
			continue
		}
		cn, some, err := harness.JudgeVariants(variants, vouts)
		if err != nil {
			return nil, nil, err
		}
		if cn != nil {
			cons[c.Name] = cn
		}
		for _, f := range some {
			figs = append(figs, f...)
		}
	}
	return figs, cons, nil
}

// report prints the per-run lines, the consensus of each case and the
// tables, and returns the exit status (1 when a check failed).
func report(cases []harness.Case, figs []*harness.Figures, cons map[string]*harness.Consensus) int {
	fmt.Println()
	for _, f := range figs {
		fmt.Println(harness.RunLine(f))
	}
	fmt.Println()
	harness.WriteConsensus(os.Stdout, cases, cons)
	fmt.Println()
	return tables(cases, figs)
}

// tables prints the online and settled tables of the cases' figures and
// every failed check; 1 when a check failed.
func tables(cases []harness.Case, figs []*harness.Figures) int {
	sums := harness.Summarize(cases, figs)
	harness.WriteTable(os.Stdout, sums)
	fmt.Println()
	if harness.WriteLeaveOneOut(os.Stdout, sums) {
		fmt.Println()
	}
	harness.WriteSettledTable(os.Stdout, sums)
	status := 0
	for _, s := range sums {
		for _, l := range s.Failures() {
			fmt.Println("FAILED", l)
			status = 1
		}
	}
	return status
}

// table prints the table of earlier runs' figures; with rejudge, the runs'
// results folders are judged again (by case, against their consensus).
func table(selected []harness.Case, files []string, rejudge bool, replay *detector.Config, out, looK6 string) int {
	var figs []*harness.Figures
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "live: -from:", err)
			return 2
		}
		var some []*harness.Figures
		if err := json.Unmarshal(b, &some); err != nil {
			fmt.Fprintf(os.Stderr, "live: -from %s: %v\n", f, err)
			return 2
		}
		figs = append(figs, some...)
	}
	// the cases the files hold runs of, each followed by its profiled
	// variant when they hold runs of it
	seen := map[string]bool{}
	for _, f := range figs {
		seen[f.Case] = true
	}
	var cases []harness.Case
	for _, c := range selected {
		if seen[c.Name] {
			cases = append(cases, c)
		}
		if seen[c.Name+"+profile"] {
			cases = append(cases, c.WithProfile(""))
		}
	}
	// runs of a case the harness no longer has (renamed, removed) are left
	// out: say so, so that their failures are not silently dropped
	known := map[string]bool{}
	for _, c := range cases {
		known[c.Name] = true
	}
	var left []string
	for name := range seen {
		if !known[name] && !known[strings.TrimSuffix(name, "+profile")] {
			left = append(left, name)
		}
	}
	if len(left) > 0 && len(cases) > 0 {
		sort.Strings(left)
		fmt.Fprintf(os.Stderr, "live: -from: left out the runs of %s (not among the cases selected, or no longer a case of the harness)\n",
			strings.Join(left, ", "))
	}
	if len(cases) == 0 {
		var held []string
		for name := range seen {
			held = append(held, name)
		}
		sort.Strings(held)
		if len(held) == 0 {
			fmt.Fprintln(os.Stderr, "live: -from: the files hold no run")
		} else {
			fmt.Fprintf(os.Stderr, "live: -from: the files hold no run of the cases selected; they hold runs of %s\n", strings.Join(held, ", "))
		}
		return 2
	}
	if !rejudge {
		return tables(cases, figs)
	}
	// a replay's rows name the recorded run's folder, whose own tags (and
	// profile) are not the ones they judged: judging them again would judge
	// something else under their name
	for _, f := range figs {
		if f.Replayed != "" {
			fmt.Fprintf(os.Stderr, "live: -from: %s run %d holds the figures of a replay (%s), not of a run's own tags; "+
				"-rejudge, -replay, -loo-profile and -separate read the figures.json the runs wrote\n", f.Case, f.Run, f.Replayed)
			return 2
		}
	}
	outs := map[string]map[int]*harness.RunOutput{}
	for _, f := range figs {
		o, err := harness.LoadOutput(f.Dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "live: -rejudge:", err)
			return 2
		}
		if outs[f.Case] == nil {
			outs[f.Case] = map[int]*harness.RunOutput{}
		}
		run := f.Run
		for outs[f.Case][run] != nil {
			run += 1000 // the same run number from two files: keep both
		}
		outs[f.Case][run] = o
	}
	figs, cons, err := judgeCases(cases, outs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "live: -rejudge:", err)
		return 2
	}
	if out != "" {
		defer func() {
			if err := writeJSON(filepath.Join(out, "figures.json"), figs); err != nil {
				fmt.Fprintln(os.Stderr, "live:", err)
			}
			if err := writeJSON(filepath.Join(out, "consensus.json"), cons); err != nil {
				fmt.Fprintln(os.Stderr, "live:", err)
			}
		}()
	}
	if replay != nil {
		byName := map[string]harness.Case{}
		for _, c := range cases {
			byName[c.Name] = c
		}
		for i, f := range figs {
			if figs[i], err = harness.ReplayFigures(byName[f.Case], f, outs[f.Case][f.Run], *replay, 0.5); err != nil {
				fmt.Fprintln(os.Stderr, "live: -replay:", err)
				return 2
			}
		}
	}
	if looK6 != "" {
		var err error
		if cases, figs, err = looProfiles(cases, figs, outs, *replay, looK6, out); err != nil {
			fmt.Fprintln(os.Stderr, "live: -loo-profile:", err)
			return 2
		}
	}
	return report(cases, figs, cons)
}

// looProfiles replays each run of a case (4 runs or more, without a
// profile) with the prior of a profile of the case's other runs, judged
// against the same reference as NAME+profile; the profiles go to
// out/loo-profiles (a temporary folder without -out). A profile is learnt
// from all the case's other runs in the -from files: from one batch, they
// ran in the same hour as the run it judges; from several, they did not.
func looProfiles(cases []harness.Case, figs []*harness.Figures, outs map[string]map[int]*harness.RunOutput,
	cfg detector.Config, k6, out string) ([]harness.Case, []*harness.Figures, error) {
	dir := filepath.Join(out, "loo-profiles")
	if out == "" {
		tmp, err := os.MkdirTemp("", "live-loo-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	env := &harness.Env{K6: k6, Logf: func(string, ...any) {}}
	byCase := map[string][]*harness.Figures{}
	for _, f := range figs {
		byCase[f.Case] = append(byCase[f.Case], f)
	}
	var outCases []harness.Case
	for _, c := range cases {
		outCases = append(outCases, c)
		runs := byCase[c.Name]
		if c.Profiled || len(runs) < 4 || byCase[c.Name+"+profile"] != nil {
			continue
		}
		// every run's profile first: when k6 x regime profile refuses the
		// runs of a case (another load: a closed model's throughput more
		// than 20% apart between runs), the case is left out, said here
		paths := make([]string, len(runs))
		refused := false
		for i, f := range runs {
			var dirs []string
			for _, g := range runs {
				if g != f {
					dirs = append(dirs, g.Dir)
				}
			}
			paths[i] = filepath.Join(dir, fmt.Sprintf("%s-r%d.json", strings.TrimSuffix(profileFile(c), ".json"), f.Run))
			// k6 x regime profile exits 2 for refused input and for an
			// unreadable folder or unwritable output alike: the folders were
			// read and the output folder made above, so it is a refusal
			// unless the disk failed, and the message printed says which
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			err := env.BuildProfile(ctx, dirs, paths[i])
			cancel()
			if err != nil {
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 2 {
					return nil, nil, fmt.Errorf("%s run %d: %w", c.Name, f.Run, err)
				}
				fmt.Fprintf(os.Stderr, "live: -loo-profile: %s left out: the profile of its runs but %d was refused: %v\n", c.Name, f.Run, err)
				refused = true
				break
			}
		}
		if refused {
			continue
		}
		for i, f := range runs {
			path := paths[i]
			pcfg, err := harness.WithProfilePrior(cfg, path)
			if err != nil {
				return nil, nil, fmt.Errorf("%s run %d: %w", c.Name, f.Run, err)
			}
			pc := c.WithProfile(path)
			g := *f
			g.Case = pc.Name
			h, err := harness.ReplayFiguresWith(pc, &g, outs[c.Name][f.Run], pcfg, 0.5)
			if err != nil {
				return nil, nil, fmt.Errorf("%s run %d: %w", c.Name, f.Run, err)
			}
			h.Replayed = "loo-profile " + path
			figs = append(figs, h)
		}
		outCases = append(outCases, c.WithProfile(""))
	}
	return outCases, figs, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
