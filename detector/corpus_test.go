package detector

import (
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// corpusDir is ../shared/corpus/jmh relative to the module root.
func corpusDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	require.NoError(tb, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skip("module root not found")
		}
		dir = parent
	}
	c := filepath.Join(dir, "..", "shared", "corpus", "jmh")
	if _, err := os.Stat(filepath.Join(c, "labels.csv")); err != nil {
		if os.Getenv("CI") != "" { // CI runs with ../shared beside the clone
			tb.Fatalf("JMH corpus not found at %s (CI is set, and CI runs with ../shared beside the repo): %v", c, err)
		}
		tb.Skipf("JMH corpus not found at %s (it is read at run time, never committed): %v", c, err)
	}
	return c
}

type corpusKey struct{ id, fork string }

// readCorpusFile returns the seconds_per_op series of every fork of a file.
func readCorpusFile(tb testing.TB, path string) map[string][]float64 {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(tb, err)
	r := csv.NewReader(gz)
	hdr, err := r.Read()
	require.NoError(tb, err)
	require.Equal(tb, []string{"fork", "i", "seconds_per_op"}, hdr)
	out := map[string][]float64{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out
		}
		require.NoError(tb, err)
		v, err := strconv.ParseFloat(rec[2], 64)
		require.NoError(tb, err)
		out[rec[0]] = append(out[rec[0]], v)
	}
}

// corpusFigures are the corpus README's metrics.
type corpusFigures struct {
	forks                               int
	median, cut, within, missed, noneNS float64
}

func (f corpusFigures) String() string {
	return fmt.Sprintf("%d forks: median abs error %.0f it, cut short %.1f%%, within 5%% %.1f%%, missed %.1f%%, no-steady reported none %.1f%%",
		f.forks, f.median, f.cut, f.within, f.missed, f.noneNS)
}

// scoreCorpus runs estimate on every fork of the corpus that keep accepts
// (in parallel, one per CPU) and scores its steady_start against the labels.
func scoreCorpus(t *testing.T, keep func(fork string) bool, estimate func(xs []float64) *Point) corpusFigures {
	t.Helper()
	dir := corpusDir(t)
	lf, err := os.Open(filepath.Join(dir, "labels.csv"))
	require.NoError(t, err)
	defer lf.Close()
	recs, err := csv.NewReader(lf).ReadAll()
	require.NoError(t, err)
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	labels := map[corpusKey]int{}
	for _, r := range recs[1:] {
		ss, err := strconv.Atoi(r[col["steady_start"]])
		require.NoError(t, err)
		labels[corpusKey{r[col["id"]], r[col["fork"]]}] = ss
	}

	files, err := filepath.Glob(filepath.Join(dir, "series", "*.csv.gz"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	type job struct {
		ss int
		xs []float64
	}
	var jobs []job
	for _, f := range files {
		id := filepath.Base(f)
		id = id[:len(id)-len(".csv.gz")]
		for fork, xs := range readCorpusFile(t, f) {
			ss, ok := labels[corpusKey{id, fork}]
			require.True(t, ok, "no label for %s fork %s", id, fork)
			if keep(fork) {
				jobs = append(jobs, job{ss, xs})
			}
		}
	}
	got := make([]*Point, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				got[i] = estimate(jobs[i].xs)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()

	var errs []float64
	var nSteady, cut, within, missed, nNone, none int
	for i, j := range jobs {
		if j.ss < 0 {
			nNone++
			if got[i] == nil {
				none++
			}
			continue
		}
		nSteady++
		if got[i] == nil {
			missed++
			continue
		}
		e := int(got[i].Index) - j.ss
		if e < 0 {
			cut++
		}
		if e >= -150 && e <= 150 {
			within++
		}
		errs = append(errs, float64(max(e, -e)))
	}
	require.NotEmpty(t, errs)
	require.Positive(t, nNone)
	slices.Sort(errs)
	pct := func(a, b int) float64 { return 100 * float64(a) / float64(b) }
	return corpusFigures{
		forks: len(jobs), median: errs[len(errs)/2], cut: pct(cut, nSteady-missed),
		within: pct(within, nSteady), missed: pct(missed, nSteady), noneNS: pct(none, nNone),
	}
}

// replay runs a default detector over xs (index as time).
func replay(xs []float64) *Detector {
	d, err := New(DefaultConfig())
	if err != nil {
		panic(err)
	}
	for i, v := range xs {
		d.Observe(int64(i), v)
	}
	return d
}

// TestCorpusAccuracy scores the online steady_start (its final value) on the
// JMH corpus with the README's metrics and asserts that it beats every
// reference technique on the columns where it does, and guards the other
// two against regressions.
func TestCorpusAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("corpus accuracy skipped with -short")
	}
	t.Parallel()
	f := scoreCorpus(t, func(string) bool { return true }, func(xs []float64) *Point {
		return replay(xs).Snapshot().SteadyStart
	})
	t.Log("online:", f)
	// The best reference technique per column (corpus README): median
	// abs error < 130, cut short < 11%, within 5% > 40%, missed < 10%,
	// no-steady reported none > 72%.
	require.Less(t, f.median, 130.0, "median abs error")
	require.Greater(t, f.within, 40.0, "within 5%")
	require.Less(t, f.missed, 10.0, "missed")
	// Not met by the online steady_start (see the accuracy report): these
	// two guard against regressions from the current figures and log the
	// gap to the target.
	if f.cut >= 11 {
		t.Logf("TARGET NOT MET online: cut short %.1f%% (target < 11%%)", f.cut)
	}
	if f.noneNS <= 72 {
		t.Logf("TARGET NOT MET online: no-steady reported none %.1f%% (target > 72%%)", f.noneNS)
	}
	require.Less(t, f.cut, 16.5, "cut short (regression guard)")
	require.Greater(t, f.noneNS, 50.0, "no-steady reported none (regression guard)")
}

// TestCorpusHindsight scores the end-of-run refinement on fork 0 of every
// benchmark (114 of the 1,140, ~90 s here; all of them take `make accuracy`
// ~6 minutes on 2 cores) against the targets. `make test` runs it without the
// race detector, which makes PELT several times slower.
func TestCorpusHindsight(t *testing.T) {
	if testing.Short() {
		t.Skip("corpus accuracy skipped with -short")
	}
	if raceEnabled {
		t.Skip("run without -race (make test does): PELT under the race detector takes minutes here")
	}
	t.Parallel()
	f := scoreCorpus(t, func(fork string) bool { return fork == "0" }, func(xs []float64) *Point {
		h, err := replay(xs).Hindsight()
		if err != nil {
			panic(err)
		}
		return h.SteadyStart
	})
	t.Log("hindsight:", f)
	require.Equal(t, 114, f.forks)
	require.Less(t, f.median, 130.0, "median abs error")
	require.Less(t, f.cut, 11.0, "cut short")
	require.Greater(t, f.within, 40.0, "within 5%")
	require.Less(t, f.missed, 10.0, "missed")
	require.Greater(t, f.noneNS, 72.0, "no-steady reported none")
}
