// Command live is the live tag-quality harness (`make live`): it builds and
// starts real services on 127.0.0.1, drives each with the project's k6 in
// repeated runs, judges the regime tags against an offline reference of the
// whole run, and prints the figures per run and a table per case.
//
//	go run ./live/cmd/live [-cases all|short|NAME,...] [-runs 5] [-out DIR] [-k6 ./k6]
//
// Exit status: 0 when every must-show check passed on every run, 1 when one
// failed, 2 on bad usage or when a run gave nothing to judge (a service that
// did not start, a port in use, k6 without results).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xk6-regime/xk6-regime/live/harness"
)

func main() {
	os.Exit(run())
}

func run() int {
	cases := flag.String("cases", "all", "cases to run: all, short, or names separated by commas")
	runs := flag.Int("runs", 5, "repeated runs per case (1-50)")
	out := flag.String("out", "", "folder for the results and figures (default: .cache/live/<UTC time>)")
	k6 := flag.String("k6", "./k6", "the k6 binary with the extension")
	demo := flag.String("demo", "./bin/demo-service", "the demo service binary")
	from := flag.String("from", "", "run nothing: print the table of figures.json files (comma-separated) of earlier runs")
	rejudge := flag.Bool("rejudge", false, "with -from: judge the runs' results folders again (after a change of the reference)")
	flag.Parse()
	if *runs < 1 || *runs > 50 {
		fmt.Fprintf(os.Stderr, "live: -runs must be 1..50, got %d\n", *runs)
		return 2
	}
	selected, err := harness.SelectCases(*cases)
	if err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	if *from != "" {
		return table(selected, strings.Split(*from, ","), *rejudge)
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
	env := &harness.Env{K6: abs(*k6), Demo: abs(*demo), Repo: repo, Build: filepath.Join(repo, ".cache", "live", "build"),
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var services []harness.Service
	for _, c := range selected {
		services = append(services, c.Service)
	}
	if err := env.Prepare(ctx, services); err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		return 2
	}
	var figs []*harness.Figures
	status := 0
	// runs interleave the cases, so that a slow phase of the machine does
	// not fall on all runs of one case
	for r := 1; r <= *runs; r++ {
		for _, c := range selected {
			f, err := env.RunCase(ctx, c, r, filepath.Join(*out, "runs"))
			if err != nil {
				fmt.Fprintln(os.Stderr, "live:", err)
				return 2
			}
			fmt.Println(harness.RunLine(f))
			figs = append(figs, f)
			if err := writeJSON(filepath.Join(*out, "figures.json"), figs); err != nil {
				fmt.Fprintln(os.Stderr, "live:", err)
				return 2
			}
		}
	}
	sums := harness.Summarize(selected, figs)
	fmt.Println()
	harness.WriteTable(os.Stdout, sums)
	fmt.Println()
	harness.WriteSettledTable(os.Stdout, sums)
	for _, s := range sums {
		for _, l := range s.Failures() {
			fmt.Println("FAILED", l)
			status = 1
		}
	}
	fmt.Printf("\nfigures: %s\n", filepath.Join(*out, "figures.json"))
	return status
}

// table prints the table of earlier runs' figures.
func table(cases []harness.Case, files []string, rejudge bool) int {
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
		if rejudge {
			for i, f := range some {
				c, err := harness.SelectCases(f.Case)
				if err != nil {
					fmt.Fprintln(os.Stderr, "live: -rejudge:", err)
					return 2
				}
				if some[i], err = harness.Rejudge(c[0], f.Run, f.Dir); err != nil {
					fmt.Fprintln(os.Stderr, "live: -rejudge:", err)
					return 2
				}
				fmt.Println(harness.RunLine(some[i]))
			}
		}
		figs = append(figs, some...)
	}
	sums := harness.Summarize(cases, figs)
	harness.WriteTable(os.Stdout, sums)
	fmt.Println()
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
