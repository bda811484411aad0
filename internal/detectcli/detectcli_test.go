package detectcli

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// csvSeries renders a CSV with columns fork,i,seconds_per_op: for each fork
// a warm-up from 2x to 1x over the first 400 rows, then flat with a little
// deterministic noise.
func csvSeries(forks, n int) string {
	var b strings.Builder
	b.WriteString("fork,i,seconds_per_op\n")
	for f := range forks {
		for i := range n {
			v := 1e-8 * (1 + math.Max(0, 1-float64(i)/400)) * (1 + 0.01*math.Sin(float64(i)*1.7))
			fmt.Fprintf(&b, "%d,%d,%g\n", f, i, v)
		}
	}
	return b.String()
}

func writeFile(tb testing.TB, dir, name, content string, gz bool) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	data := []byte(content)
	if gz {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, err := w.Write(data)
		require.NoError(tb, err)
		require.NoError(tb, w.Close())
		data = buf.Bytes()
	}
	require.NoError(tb, os.WriteFile(p, data, 0o600))
	return p
}

type line struct {
	File        string         `json:"file"`
	Group       *string        `json:"group"`
	N           int64          `json:"n"`
	ColdEnd     *int64         `json:"cold_end"`
	SteadyStart *int64         `json:"steady_start"`
	DeclaredAt  *int64         `json:"declared_at"`
	Class       string         `json:"class"`
	Relapses    int            `json:"relapses"`
	Params      map[string]any `json:"params"`
	Hindsight   map[string]any `json:"hindsight"`
	Other       map[string]any `json:"other"`
}

func parse(tb testing.TB, out string) []line {
	tb.Helper()
	var ls []line
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		if s == "" {
			continue
		}
		var l line
		require.NoError(tb, json.Unmarshal([]byte(s), &l), s)
		ls = append(ls, l)
	}
	return ls
}

func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", csvSeries(2, 3000), false)
	gzSuffix := writeFile(t, dir, "good.csv.gz", csvSeries(1, 3000), true)
	gzMagic := writeFile(t, dir, "gzipped-no-suffix.csv", csvSeries(1, 3000), true)
	badNum := writeFile(t, dir, "badnum.csv", "fork,i,seconds_per_op\n0,0,1\n0,1,abc\n", false)
	timed := writeFile(t, dir, "timed.csv", "ts,ms\n0,10\n0.5,11\n1.0,10\n1.5,12\n2.0,10\n2.5,10\n3.0,10\n3.5,11\n4,10\n4.5,10\n5,10\n5.5,10\n", false)
	noRows := writeFile(t, dir, "empty.csv", "fork,i,seconds_per_op\n", false)
	missing := filepath.Join(dir, "missing.csv")
	quote := writeFile(t, dir, "quote.csv", "value\n1\nx\"y\n", false)
	badHeader := writeFile(t, dir, "badheader.csv", "a,\"b\n1,2\n", false)
	badValue := func(v string) string {
		return writeFile(t, dir, "value-"+v+".csv", "fork,i,seconds_per_op\n0,0,1\n0,1,"+v+"\n", false)
	}
	badTime := func(name, v string) string {
		return writeFile(t, dir, "time-"+name+".csv", "ts,ms\n0,10\n"+v+",11\n", false)
	}
	var groups strings.Builder
	groups.WriteString("g,v\n")
	for g := range 5 {
		for i := range 3 {
			fmt.Fprintf(&groups, "g%d,%d\n", g, 10+i)
		}
	}
	fmt.Fprintf(&groups, "g4,10\ng0,11\n") // g4 seen again beyond the cap, g0 again within
	manyGroups := writeFile(t, dir, "groups.csv", groups.String(), false)

	for _, tc := range []struct {
		name      string
		args      []string
		wantCode  int
		wantLines int
		wantErr   []string // substrings of stderr
		check     func(t *testing.T, ls []line)
	}{
		{
			name: "groups in file order", args: []string{"--group", "fork", "--column", "seconds_per_op", good},
			wantLines: 2,
			check: func(t *testing.T, ls []line) {
				require.Equal(t, "0", *ls[0].Group)
				require.Equal(t, "1", *ls[1].Group)
				for _, l := range ls {
					require.Equal(t, good, l.File)
					require.EqualValues(t, 3000, l.N)
					require.NotNil(t, l.SteadyStart)
					require.InDelta(t, 400, *l.SteadyStart, 150)
					require.GreaterOrEqual(t, *l.DeclaredAt, *l.SteadyStart)
					require.Equal(t, "warmup", l.Class)
					require.EqualValues(t, 50, l.Params["window_min"])
					require.Contains(t, l.Hindsight, "steady_start")
				}
			},
		},
		{
			name: "no group: one series per file, default last column", args: []string{gzSuffix, gzMagic},
			wantLines: 2,
			check: func(t *testing.T, ls []line) {
				require.Nil(t, ls[0].Group)
				require.EqualValues(t, 3000, ls[0].N)
				require.EqualValues(t, 3000, ls[1].N)
			},
		},
		{
			name: "config flags reach params", args: []string{"--window-min", "20", "--median-tolerance", "0.1", good},
			wantLines: 1,
			check: func(t *testing.T, ls []line) {
				require.EqualValues(t, 20, ls[0].Params["window_min"])
				require.EqualValues(t, 0.1, ls[0].Params["median_tolerance"])
				require.EqualValues(t, 6000, ls[0].N)
			},
		},
		{
			name:      "windows by duration with a time column",
			args:      []string{"--time", "ts", "--time-unit", "s", "--window-min", "8", "--window-min-duration", "2s", timed},
			wantLines: 1,
			check: func(t *testing.T, ls []line) {
				require.Equal(t, "2s", ls[0].Params["window_min_duration"])
				require.EqualValues(t, 12, ls[0].N)
			},
		},
		{
			name: "window duration without time column", args: []string{"--window-min-duration", "1s", good},
			wantCode: 2, wantErr: []string{"--time"},
		},
		{
			name: "bad time unit", args: []string{"--time", "ts", "--time-unit", "h", timed},
			wantCode: 2, wantErr: []string{"--time-unit"},
		},
		{
			name: "bad files reported, others processed", args: []string{"--group", "fork", missing, badNum, good, noRows},
			wantCode: 1, wantLines: 2,
			wantErr: []string{"missing.csv", "no such file", "badnum.csv: line 3", `column "seconds_per_op"`, `"abc"`, "empty.csv: empty series"},
		},
		{
			name: "CSV quote error in a data row: an error, later files processed", args: []string{quote, badHeader, timed},
			wantCode: 1, wantLines: 1,
			wantErr: []string{"quote.csv: parse error on line 3", `bare " in non-quoted-field`, "badheader.csv: header:", "extraneous or missing"},
		},
		{
			name:     "NaN, infinite, negative, zero and unscalable values are errors naming line and column",
			args:     []string{badValue("NaN"), badValue("-Inf"), badValue("-1"), badValue("0"), badValue("5e-324"), timed},
			wantCode: 1, wantLines: 1,
			wantErr: []string{
				`value-NaN.csv: line 3: column "seconds_per_op": "NaN": NaN is not a finite number`,
				`value--Inf.csv: line 3: column "seconds_per_op": "-Inf": -Inf is not a finite number`,
				`value--1.csv: line 3: column "seconds_per_op": "-1": -1 is not > 0`,
				`value-0.csv: line 3: column "seconds_per_op": "0": 0 is not > 0`,
				`value-5e-324.csv: line 3: column "seconds_per_op": "5e-324": 5e-324 is below 1e-300`,
			},
		},
		{
			name:     "NaN, negative and overflowing timestamps are errors naming line and column",
			args:     []string{"--time", "ts", badTime("nan", "NaN"), badTime("neg", "-0.5"), badTime("big", "1e10")},
			wantCode: 1,
			wantErr: []string{
				`time-nan.csv: line 3: time column "ts": "NaN" (--time-unit s): NaN is not a finite number`,
				`time-neg.csv: line 3: time column "ts": "-0.5" (--time-unit s): -5e+08 is negative`,
				`time-big.csv: line 3: time column "ts": "1e10" (--time-unit s): 1e+19 ns is beyond`,
			},
		},
		{
			name: "groups beyond --max-groups are counted in one other line", args: []string{"--group", "g", "--window-min", "8", "--max-groups", "2", manyGroups},
			wantLines: 3,
			wantErr:   []string{"groups.csv: WARNING: 3 groups beyond --max-groups 2 (10 rows) were not analysed"},
			check: func(t *testing.T, ls []line) {
				require.Equal(t, "g0", *ls[0].Group)
				require.EqualValues(t, 4, ls[0].N)
				require.Equal(t, "g1", *ls[1].Group)
				require.Equal(t, map[string]any{"groups": 3.0, "groups_exact": true, "rows": 10.0, "max_groups": 2.0}, ls[2].Other)
			},
		},
		{
			name: "missing column", args: []string{"--column", "nope", good},
			wantCode: 1, wantErr: []string{`no column "nope"`},
		},
		{
			name: "missing group column", args: []string{"--group", "nope", good},
			wantCode: 1, wantErr: []string{`no group column "nope"`},
		},
		{
			name: "invalid option names the option", args: []string{"--median-tolerance", "0", "--sig-digits", "9", good},
			wantCode: 2, wantErr: []string{"median_tolerance must be in", "sig_digits must be in"},
		},
		{
			name: "no files", args: nil, wantCode: 2, wantErr: []string{"requires at least 1 arg"},
		},
		{
			name: "unknown flag", args: []string{"--bogus", good}, wantCode: 2, wantErr: []string{"unknown flag: --bogus"},
		},
		{
			name: "bad --max-groups", args: []string{"--max-groups", "0", good}, wantCode: 2, wantErr: []string{"--max-groups must be at least 1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := Run(tc.args, &stdout, &stderr)
			require.Equal(t, tc.wantCode, code, "stderr: %s", stderr.String())
			ls := parse(t, stdout.String())
			require.Len(t, ls, tc.wantLines)
			for _, e := range tc.wantErr {
				require.Contains(t, stderr.String(), e)
			}
			if tc.check != nil {
				tc.check(t, ls)
			}
		})
	}
}

func TestCommandHasEveryConfigFlag(t *testing.T) {
	t.Parallel()
	cmd := NewCommand(&bytes.Buffer{}, &bytes.Buffer{})
	for _, name := range []string{
		"window-min", "window-min-duration", "max-windows", "median-tolerance", "tail-tolerance",
		"mean-tolerance", "min-steady-fraction", "relapse-on-mean", "relapse-on-tail",
		"dispersion-ratio", "cusum-allowance", "mser5", "tail-quantile", "tail-min-above",
		"noise-z", "stable-windows", "relapse-windows", "cold-factor", "cold-confirm", "cold-max",
		"no-steady-windows", "sig-digits", "dynamic-range",
		"column", "group", "time", "time-unit", "max-groups",
	} {
		require.NotNil(t, cmd.Flags().Lookup(name), name)
	}
}

// TestTagsAndNoHindsight: --tags writes one row per observation with the
// regime it was counted in, consistent with the JSON line's counts and
// transitions; --no-hindsight skips the refinement (hindsight null); a
// results folder's series file (a # comment first) reads as is, with
// --preset service and its timestamps.
func TestTagsAndNoHindsight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("# xk6-regime iteration series of scenario live: every iteration (12000), in arrival order; end_ms is Unix ms\n")
	b.WriteString("index,n,end_ms,min_ms,median_ms,max_ms,regime\n")
	for i := range 12000 { // 500 a second for 24 s: 4 ms, then 2 ms after 4 s
		v := 2.0 * (1 + 0.05*math.Sin(float64(i)*1.3))
		if i < 2000 {
			v *= 2
		}
		fmt.Fprintf(&b, "%d,1,%.3f,%g,%g,%g,steady\n", i, 1.7e12+float64(i)*2, v, v, v)
	}
	in := writeFile(t, dir, "iterations-live.csv", b.String(), false)
	tags := filepath.Join(dir, "tags.csv")
	var stdout, stderr bytes.Buffer
	code := Run([]string{"--preset", "service", "--time", "end_ms", "--time-unit", "ms", "--column", "median_ms",
		"--no-hindsight", "--tags", tags, in}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	var l struct {
		line
		Counts map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &l))
	require.Nil(t, l.Hindsight, "--no-hindsight: the refinement is skipped")
	require.NotNil(t, l.SteadyStart)
	require.Equal(t, "warmup", l.Class)

	raw, err := os.ReadFile(tags)
	require.NoError(t, err)
	rows := strings.Split(strings.TrimSpace(string(raw)), "\n")
	require.Equal(t, "file,group,index,time,value,regime", rows[0])
	require.Len(t, rows, 12001)
	counts := map[string]int64{}
	firstSteady := -1
	for i, r := range rows[1:] {
		f := strings.Split(r, ",")
		require.Len(t, f, 6)
		require.Equal(t, in, f[0])
		require.Equal(t, fmt.Sprint(i), f[2])
		counts[f[5]]++
		if f[5] == "steady" && firstSteady < 0 {
			firstSteady = i
		}
	}
	require.Equal(t, l.Counts, counts, "the tags sum to the counts of the JSON line")
	require.Equal(t, *l.DeclaredAt+1, int64(firstSteady), "the first steady tag follows the declaration")
	require.Greater(t, firstSteady, 2000, "no steady tag on the 4 ms level")

	// a bad --tags path is an error naming the option
	stdout.Reset()
	stderr.Reset()
	code = Run([]string{"--tags", filepath.Join(dir, "missing", "t.csv"), in}, &stdout, &stderr)
	require.Equal(t, 2, code, "an unwritable --tags path is bad input")
	require.Contains(t, stderr.String(), "--tags")

	// --tags naming an input would empty it before it is read
	before, err := os.ReadFile(in)
	require.NoError(t, err)
	stdout.Reset()
	stderr.Reset()
	code = Run([]string{"--tags", dir + "/./" + filepath.Base(in), in}, &stdout, &stderr)
	require.Equal(t, 2, code, stderr.String())
	require.Contains(t, stderr.String(), "is the input file")
	after, err := os.ReadFile(in)
	require.NoError(t, err)
	require.Equal(t, before, after, "the input is untouched")

	// an input with an error leaves --tags as it was: no file when there
	// was none, the old one when there was, and no temporary file beside it
	bad := writeFile(t, dir, "bad.csv", "index,n,end_ms,min_ms,median_ms,max_ms,regime\n0,1,1,2,2,2,steady\n1,1,2,2,x,2,steady\n", false)
	fresh := filepath.Join(dir, "fresh.csv")
	stdout.Reset()
	stderr.Reset()
	code = Run([]string{"--column", "median_ms", "--tags", fresh, in, bad}, &stdout, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Contains(t, stderr.String(), "--tags "+fresh+" not written")
	require.NoFileExists(t, fresh, "a failed input writes no --tags file")
	require.NoError(t, os.WriteFile(fresh, []byte("kept\n"), 0o600))
	code = Run([]string{"--column", "median_ms", "--tags", fresh, bad}, &stdout, &stderr)
	require.Equal(t, 1, code, stderr.String())
	kept, err := os.ReadFile(fresh)
	require.NoError(t, err)
	require.Equal(t, "kept\n", string(kept), "the file there before is kept whole")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		require.False(t, strings.HasPrefix(e.Name(), "."), "temporary file %s left behind", e.Name())
	}

	// a link stays a link (the file it names is replaced, its mode kept);
	// no regular file (a pipe, /dev/stdout) is written as it goes
	target := filepath.Join(dir, "target.csv")
	require.NoError(t, os.WriteFile(target, []byte("old\n"), 0o640))
	link := filepath.Join(dir, "link.csv")
	require.NoError(t, os.Symlink(target, link))
	svc := []string{"--preset", "service", "--time", "end_ms", "--time-unit", "ms", "--column", "median_ms"}
	stderr.Reset()
	code = Run(append(append([]string{}, svc...), "--tags", link, in), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	li, err := os.Lstat(link)
	require.NoError(t, err)
	require.NotZero(t, li.Mode()&os.ModeSymlink, "the link is kept")
	ti, err := os.Stat(target)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), ti.Mode().Perm())
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(got), "file,group,index,time,value,regime\n"))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	read := make(chan []byte)
	go func() {
		b, _ := os.ReadFile(fifo)
		read <- b
	}()
	code = Run(append(append([]string{}, svc...), "--tags", fifo, in), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Len(t, strings.Split(strings.TrimSpace(string(<-read)), "\n"), 12001, "every tag through the pipe")
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeNamedPipe, "the pipe is still a pipe")
}
