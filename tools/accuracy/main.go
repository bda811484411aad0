// Command accuracy scores the detector against the JMH steady-state corpus
// (Traini et al., EMSE 2023) with the metrics of the corpus README, beside the
// reference techniques recorded in labels.csv.
//
//	go run ./tools/accuracy -corpus ../shared/corpus/jmh [-detect-output FILE.jsonl]
package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/xk6-regime/xk6-regime/internal/detectcli"
)

type fork struct {
	id   string
	fork string
	ss   int // labelled steady start, -1 = none
	ref  map[string]*int
}

// est is one method's estimate for a fork (nil = none).
type key struct{ id, fork string }

func main() {
	corpus := flag.String("corpus", "../shared/corpus/jmh", "corpus directory (labels.csv, series/)")
	detOut := flag.String("detect-output", "", "detect JSONL output to score (default: run detect in-process)")
	extra := flag.String("detect-args", "", "extra flags for the in-process detect run (space separated)")
	save := flag.String("save", "", "also write the in-process detect output to this JSONL file")
	flag.Parse()
	os.Exit(run(*corpus, *detOut, *extra, *save, os.Stdout, os.Stderr))
}

func run(corpus, detOut, extra, save string, stdout, stderr io.Writer) int {
	labelsPath := filepath.Join(corpus, "labels.csv")
	if _, err := os.Stat(labelsPath); err != nil {
		fmt.Fprintf(stdout, "accuracy: corpus not found at %s, nothing to score\n", corpus)
		return 0
	}
	forks, err := readLabels(labelsPath)
	if err != nil {
		fmt.Fprintln(stderr, "accuracy:", err)
		return 1
	}
	var lines io.Reader
	if detOut != "" {
		f, err := os.Open(detOut)
		if err != nil {
			fmt.Fprintln(stderr, "accuracy:", err)
			return 1
		}
		defer f.Close()
		lines = f
	} else {
		files, _ := filepath.Glob(filepath.Join(corpus, "series", "*.csv.gz"))
		args := []string{"--group", "fork", "--column", "seconds_per_op"}
		if extra != "" {
			args = append(args, strings.Fields(extra)...)
		}
		var buf bytes.Buffer
		if rc := detectcli.Run(append(args, files...), &buf, stderr); rc != 0 {
			fmt.Fprintln(stderr, "accuracy: detect failed")
			return 1
		}
		if save != "" {
			if err := os.WriteFile(save, buf.Bytes(), 0o644); err != nil {
				fmt.Fprintln(stderr, "accuracy:", err)
				return 1
			}
		}
		lines = &buf
	}
	online, hind, err := readDetect(lines)
	if err != nil {
		fmt.Fprintln(stderr, "accuracy:", err)
		return 1
	}
	methods := []struct {
		name string
		get  func(f fork) *int
	}{
		{"developers' JMH configs", func(f fork) *int { return f.ref["dev"] }},
		{"KLD (dynamic reconfiguration)", func(f fork) *int { return f.ref["kld"] }},
		{"CoV", func(f fork) *int { return f.ref["cov"] }},
		{"RCIW", func(f fork) *int { return f.ref["rciw"] }},
		{"xk6-regime online steady_start", func(f fork) *int { return online[key{f.id, f.fork}] }},
		{"xk6-regime hindsight", func(f fork) *int { return hind[key{f.id, f.fork}] }},
	}
	// Two halves split by benchmark id, for a cross-validation check.
	halves := []struct {
		name string
		keep func(f fork) bool
	}{
		{"all forks", func(fork) bool { return true }},
		{"half A (benchmark id hash even)", func(f fork) bool { return half(f.id) == 0 }},
		{"half B (benchmark id hash odd)", func(f fork) bool { return half(f.id) == 1 }},
	}
	for _, h := range halves {
		var sel []fork
		for _, f := range forks {
			if h.keep(f) {
				sel = append(sel, f)
			}
		}
		fmt.Fprintf(stdout, "\n%s (%d forks)\n\n", h.name, len(sel))
		fmt.Fprintln(stdout, "| method | median abs error (it) | mean abs error (it) | cut short | within 5% | missed | no-steady reported none |")
		fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
		for _, m := range methods {
			s := score(sel, m.get)
			fmt.Fprintf(stdout, "| %s | %.0f | %.0f | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n",
				m.name, s.medErr, s.meanErr, s.cutShort, s.within, s.missed, s.noneOK)
		}
	}
	return 0
}

func half(id string) int {
	var h uint32 = 2166136261
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h & 1)
}

type scores struct{ medErr, meanErr, cutShort, within, missed, noneOK float64 }

// score follows the corpus README: over forks with a steady state, the
// absolute error of present estimates (median, mean), the share of present
// estimates cut short, the shares of all such forks within 150 iterations
// and missed; over forks labelled no steady state, the share reported as
// none. These denominators reproduce the README's reference figures.
func score(forks []fork, get func(fork) *int) scores {
	var errs []float64
	var nSteady, cut, within, missed, nNone, none int
	for _, f := range forks {
		e := get(f)
		if f.ss < 0 {
			nNone++
			if e == nil {
				none++
			}
			continue
		}
		nSteady++
		if e == nil {
			missed++
			continue
		}
		d := *e - f.ss
		if d < 0 {
			cut++
		}
		if abs(d) <= 150 {
			within++
		}
		errs = append(errs, math.Abs(float64(d)))
	}
	var s scores
	if len(errs) > 0 {
		sort.Float64s(errs)
		n := len(errs)
		s.medErr = errs[n/2]
		if n%2 == 0 {
			s.medErr = (errs[n/2-1] + errs[n/2]) / 2
		}
		for _, e := range errs {
			s.meanErr += e
		}
		s.meanErr /= float64(n)
	}
	pct := func(a, b int) float64 {
		if b == 0 {
			return math.NaN()
		}
		return 100 * float64(a) / float64(b)
	}
	s.cutShort = pct(cut, nSteady-missed) // of the forks with an estimate, as the README's figures
	s.within = pct(within, nSteady)
	s.missed = pct(missed, nSteady)
	s.noneOK = pct(none, nNone)
	return s
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func readLabels(path string) ([]fork, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, c := range []string{"id", "fork", "steady_start", "dev_last_warmup_it", "kld_last_warmup_it", "cov_last_warmup_it", "rciw_last_warmup_it"} {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("%s: missing column %s", path, c)
		}
	}
	var out []fork
	for li, r := range recs[1:] {
		ss, err := strconv.Atoi(r[col["steady_start"]])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: steady_start: %v", path, li+2, err)
		}
		fk := fork{id: r[col["id"]], fork: r[col["fork"]], ss: ss, ref: map[string]*int{}}
		for _, m := range []string{"dev", "kld", "cov", "rciw"} {
			s := strings.TrimSpace(r[col[m+"_last_warmup_it"]])
			if s == "" {
				continue
			}
			v, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %s: %v", path, li+2, m, err)
			}
			if v < 0 {
				continue
			}
			v++ // estimate = last warm-up iteration + 1
			fk.ref[m] = &v
		}
		out = append(out, fk)
	}
	return out, nil
}

func readDetect(r io.Reader) (online, hind map[key]*int, err error) {
	online, hind = map[key]*int{}, map[key]*int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var rec struct {
			File        string  `json:"file"`
			Group       *string `json:"group"`
			SteadyStart *int    `json:"steady_start"`
			Hindsight   struct {
				SteadyStart *int `json:"steady_start"`
			} `json:"hindsight"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, nil, fmt.Errorf("detect output: %w", err)
		}
		id := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(rec.File), ".gz"), ".csv")
		g := ""
		if rec.Group != nil {
			g = *rec.Group
		}
		online[key{id, g}] = rec.SteadyStart
		hind[key{id, g}] = rec.Hindsight.SteadyStart
	}
	return online, hind, sc.Err()
}
