// Command k6soak measures what k6/x/regime adds to k6's memory over a long
// run: the same constant-arrival-rate test of empty iterations with a stock
// k6 of the same version and with this repository's k6 (auto-tagging and
// detection on), one after the other, their resident set size (RSS) sampled
// from /proc every few seconds. It prints, per binary, the RSS early, at the
// end and at its peak and the slope over the second half of the run (MB per
// minute), then the differences. k6 itself grows: its end-of-test Trend
// sinks keep every value (8 bytes per sample), so only the difference and
// the difference of slopes are the extension's.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

const stockScript = `export const options = {
  scenarios: { soak: { executor: 'constant-arrival-rate', rate: %d, timeUnit: '1s', duration: '%s',
    preAllocatedVUs: 50, maxVUs: 200 } },
};
export default function () {}
`

const extScript = `import regime from 'k6/x/regime';
export const options = {
  scenarios: { soak: { executor: 'constant-arrival-rate', rate: %d, timeUnit: '1s', duration: '%s',
    preAllocatedVUs: 50, maxVUs: 200 } },
};
regime.configure(options, {});
export default function () {}
`

// saveSummary is appended to extScript when -results is set: the run's
// results folder, report.html included, as a user's handleSummary writes it.
const saveSummary = `export function handleSummary() {
  regime.saveResults({ dir: %q, required: true });
  return {};
}
`

// sample is one RSS reading, t seconds after the start.
type sample struct {
	t   float64
	rss float64 // MiB
}

func main() {
	stock := flag.String("stock", "./k6-stock", "stock k6 binary (same k6 version, no extension)")
	extBin := flag.String("k6", "./k6", "k6 binary with the extension")
	dur := flag.Duration("duration", 30*time.Minute, "duration of each run (10s..2h)")
	rate := flag.Int("rate", 10_000, "iterations per second (1..100000)")
	every := flag.Duration("sample", 5*time.Second, "RSS sampling interval (100ms..1m)")
	csvPath := flag.String("csv", "", "write every RSS sample to this CSV file (binary,seconds,rss_mib)")
	resDir := flag.String("results", "", "save the extension run's results folder under this directory and print the size of its files and report.html's draw time in Chromium")
	chromium := flag.String("chromium", "auto", "headless Chromium for the draw time: a path, auto (chromium on PATH) or none")
	flag.Parse()
	switch {
	case *dur < 10*time.Second || *dur > 2*time.Hour:
		fail(fmt.Errorf("-duration must be in 10s..2h, got %s", *dur))
	case *rate < 1 || *rate > 100_000:
		fail(fmt.Errorf("-rate must be in 1..100000, got %d", *rate))
	case *every < 100*time.Millisecond || *every > time.Minute:
		fail(fmt.Errorf("-sample must be in 100ms..1m, got %s", *every))
	}
	dir, err := os.MkdirTemp("", "k6soak-")
	if err != nil {
		fail(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	d := dur.String()
	ext := fmt.Sprintf(extScript, *rate, d)
	if *resDir != "" {
		abs, err := filepath.Abs(*resDir)
		if err != nil {
			fail(fmt.Errorf("-results: %w", err))
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			fail(fmt.Errorf("-results: %w", err))
		}
		*resDir = abs
		ext += fmt.Sprintf(saveSummary, abs)
	}
	runs := []struct{ name, bin, script string }{
		{"stock", *stock, write(dir, "stock.js", fmt.Sprintf(stockScript, *rate, d))},
		{"extension", *extBin, write(dir, "ext.js", ext)},
	}
	fmt.Printf("soak: constant-arrival-rate %d empty iterations/s for %s, each binary in turn; RSS every %s\n\n", *rate, d, *every)
	fmt.Printf("%-10s %12s %12s %12s %14s %12s\n", "binary", "RSS@30s MiB", "end MiB", "peak MiB", "slope MiB/min", "it/s")
	var rows [][]string
	res := map[string][]sample{}
	for _, r := range runs {
		ss, itRate := run(r.bin, r.script, dir, *dur, *every)
		res[r.name] = ss
		for _, s := range ss {
			rows = append(rows, []string{r.name, strconv.FormatFloat(s.t, 'f', 1, 64), strconv.FormatFloat(s.rss, 'f', 1, 64)})
		}
		fmt.Printf("%-10s %12.1f %12.1f %12.1f %14.3f %12.0f\n", r.name, at(ss, 30), ss[len(ss)-1].rss, peak(ss), slope(ss), itRate)
	}
	s, e := res["stock"], res["extension"]
	fmt.Printf("\nextension - stock: %+.1f MiB at the end, %+.1f MiB at the peak, slope %+.3f MiB/min over the second half\n",
		e[len(e)-1].rss-s[len(s)-1].rss, peak(e)-peak(s), slope(e)-slope(s))
	if *resDir != "" {
		reportFiles(*resDir, *chromium)
	}
	if *csvPath != "" {
		var b strings.Builder
		b.WriteString("binary,seconds,rss_mib\n")
		for _, r := range rows {
			b.WriteString(strings.Join(r, ",") + "\n")
		}
		if err := os.WriteFile(*csvPath, []byte(b.String()), 0o600); err != nil {
			fail(err)
		}
	}
}

// run runs k6 once, sampling its RSS, and returns the samples and the
// iteration rate k6 reports.
func run(bin, script, dir string, dur, every time.Duration) ([]sample, float64) {
	ctx, cancel := context.WithTimeout(context.Background(), dur+3*time.Minute)
	defer cancel()
	export := filepath.Join(dir, "summary.json")
	_ = os.Remove(export)
	cmd := exec.CommandContext(ctx, bin, "run", "--quiet", "--no-usage-report", "--summary-export", export, script)
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fail(fmt.Errorf("%s: %w", bin, err))
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var ss []sample
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				fail(fmt.Errorf("%s %s: %w\n%s", bin, script, err, out.String()))
			}
			if len(ss) < 2 {
				fail(fmt.Errorf("%s: fewer than 2 RSS samples; lengthen -duration or shorten -sample", bin))
			}
			return ss, iterRate(export)
		case <-tick.C:
			if v, ok := rss(cmd.Process.Pid); ok {
				ss = append(ss, sample{time.Since(start).Seconds(), v})
			}
		}
	}
}

// rss reads VmRSS of pid in MiB.
func rss(pid int) (float64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}

func iterRate(export string) float64 {
	b, err := os.ReadFile(export)
	if err != nil {
		fail(err)
	}
	// the export's "iterations" metric: {"count": N, "rate": R}
	i := strings.Index(string(b), `"iterations"`)
	if i < 0 {
		fail(fmt.Errorf("no iterations metric in %s", export))
	}
	j := strings.Index(string(b[i:]), `"rate":`)
	if j < 0 {
		fail(fmt.Errorf("no iterations rate in %s", export))
	}
	rest := string(b[i+j+len(`"rate":`):])
	end := strings.IndexAny(rest, ",}")
	v, err := strconv.ParseFloat(strings.TrimSpace(rest[:end]), 64)
	if err != nil {
		fail(fmt.Errorf("iterations rate in %s: %w", export, err))
	}
	return v
}

// at is the RSS at the first sample at or after t seconds (the last one if
// the run was shorter).
func at(ss []sample, t float64) float64 {
	for _, s := range ss {
		if s.t >= t {
			return s.rss
		}
	}
	return ss[len(ss)-1].rss
}

func peak(ss []sample) float64 {
	p := 0.0
	for _, s := range ss {
		p = max(p, s.rss)
	}
	return p
}

// slope is the least-squares slope of RSS over the second half of the
// samples, in MiB per minute.
func slope(ss []sample) float64 {
	h := ss[len(ss)/2:]
	if len(h) < 2 {
		return 0
	}
	var mt, mr float64
	for _, s := range h {
		mt += s.t
		mr += s.rss
	}
	mt /= float64(len(h))
	mr /= float64(len(h))
	var num, den float64
	for _, s := range h {
		num += (s.t - mt) * (s.rss - mr)
		den += (s.t - mt) * (s.t - mt)
	}
	if den == 0 {
		return 0
	}
	return num / den * 60
}

func write(dir, name, content string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		fail(err)
	}
	return p
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "k6soak:", err)
	os.Exit(1)
}

// reportFiles prints the sizes of the newest results folder under dir and,
// with a Chromium, report.html's draw time: the data-drawn-ms its script
// sets (from the start of navigation to the plots drawn), median of 3.
func reportFiles(dir, chromium string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		fail(fmt.Errorf("-results: %w", err))
	}
	var run string
	var newest time.Time
	for _, e := range ents {
		info, err := e.Info()
		if err == nil && e.IsDir() && info.ModTime().After(newest) {
			run, newest = filepath.Join(dir, e.Name()), info.ModTime()
		}
	}
	if run == "" {
		fail(fmt.Errorf("-results: the extension's run wrote no folder under %s", dir))
	}
	fmt.Printf("\nresults folder %s:\n", run)
	for _, name := range []string{"summary.json", "windows.csv", "report.html"} {
		if info, err := os.Stat(filepath.Join(run, name)); err == nil {
			fmt.Printf("  %-13s %10.1f KiB\n", name, float64(info.Size())/1024)
		}
	}
	var total int64
	_ = filepath.WalkDir(run, func(_ string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if info, err := e.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	fmt.Printf("  %-13s %10.1f KiB\n", "whole folder", float64(total)/1024)
	if chromium == "auto" {
		chromium = ""
		for _, c := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(c); err == nil {
				chromium = p
				break
			}
		}
		if chromium == "" {
			fmt.Println("  report.html draw time: no chromium on PATH (-chromium PATH)")
			return
		}
	}
	if chromium == "none" {
		return
	}
	re := regexp.MustCompile(`data-drawn-ms="([0-9.]+)"`)
	var ms []float64
	profile, err := os.MkdirTemp("", "k6soak-chromium-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(profile)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		// no traffic of Chromium's own (updates, sync, QUIC probes): this
		// project sends none but to 127.0.0.1; a profile of its own, removed
		out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir="+profile, "--dump-dom", "file://"+filepath.Join(run, "report.html")).Output()
		cancel()
		if err != nil {
			fail(fmt.Errorf("%s --dump-dom report.html: %w", chromium, err))
		}
		m := re.FindSubmatch(out)
		if m == nil {
			fail(fmt.Errorf("report.html in %s: no data-drawn-ms (its script did not finish)", chromium))
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		ms = append(ms, v)
	}
	slices.Sort(ms)
	fmt.Printf("  report.html drawn in Chromium: %.0f ms (median of 3; %.0f-%.0f)\n", ms[1], ms[0], ms[2])
}
