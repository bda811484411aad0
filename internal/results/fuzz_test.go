package results

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedFolder returns the files of a small results folder, for seeds.
func seedFolder(f *testing.F) map[string][]byte {
	f.Helper()
	dir := f.TempDir()
	if err := synthRun(300, DefaultSeriesLimit, 12).WriteDir(dir, WriteOptions{}); err != nil {
		f.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range []string{SummaryFile, RequestsHLogFile, WindowsFile, "hdr/iterations-load-steady.hlog", "series/iterations-load.csv"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			f.Fatal(err)
		}
		files[name] = b
	}
	return files
}

// FuzzLoadDir writes a results folder whose summary.json, request log,
// steady iteration log and iteration series are the fuzzer's, then does
// what report, merge and compare do with it: load, report, text, compare
// with itself, merge with itself and write the merge. Whatever the files,
// nothing panics: a bad folder is an error naming a file. Seed corpus in
// testdata/fuzz/FuzzLoadDir.
func FuzzLoadDir(f *testing.F) {
	seed := seedFolder(f)
	f.Add(seed[SummaryFile], seed[RequestsHLogFile], seed["hdr/iterations-load-steady.hlog"], seed["series/iterations-load.csv"])
	f.Add([]byte(`{"schema":1,"scenarios":{"api":null}}`), []byte{}, []byte{}, []byte{})
	f.Add([]byte(`{"schema":1,"requests":[null]}`), []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, summary, reqLog, iterLog, series []byte) {
		dir := t.TempDir()
		for name, b := range map[string][]byte{
			SummaryFile: summary, RequestsHLogFile: reqLog, WindowsFile: seed[WindowsFile],
			"hdr/iterations-load-steady.hlog": iterLog, "hdr/iterations-load-cold.hlog": seed["hdr/iterations-load-steady.hlog"],
			"hdr/iterations-load-warmup.hlog": seed["hdr/iterations-load-steady.hlog"], "series/iterations-load.csv": series,
		} {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r, err := LoadDir(dir)
		if err != nil {
			if !strings.Contains(err.Error(), dir) && !strings.Contains(err.Error(), "reading results") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := r.Report(io.Discard); err != nil {
			t.Fatal(err)
		}
		_ = TextTable(r.Summary)
		b, _ := ParseBudgets("p95=+10%,errors=+0.01,ttss=+20%,cold_excess=+5")
		_ = Compare(r.Summary, r.Summary, b).Text("a", "b")
		m, err := Merge([]*Run{r, r}, []string{"a", "b"})
		if err != nil {
			return
		}
		_ = m.WriteDir(t.TempDir(), WriteOptions{}) // may fail (a scenario name too long for a file name), not panic
		if err := m.Report(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzReadHLog: an HdrHistogram log of any content is read or refused with
// an error naming it, never a panic.
func FuzzReadHLog(f *testing.F) {
	seed := seedFolder(f)
	f.Add(seed[RequestsHLogFile])
	f.Add(seed["hdr/iterations-load-steady.hlog"])
	f.Add([]byte("#[StartTime: 1.0]\nTag=a,0.0,1.0,1.0,HISTFAAAAA==\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		hs, err := readHLogFrom(bytes.NewReader(data), "x.hlog")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.hlog: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, h := range hs {
			_ = h.ValueAtQuantile(99)
			_ = h.TotalCount()
		}
	})
}

// FuzzReadSeries: the iteration series (mode 0) and windows (mode 1) CSV
// files are read or refused with an error naming the file.
func FuzzReadSeries(f *testing.F) {
	seed := seedFolder(f)
	f.Add(seed["series/iterations-load.csv"], uint8(0))
	f.Add(seed[WindowsFile], uint8(1))
	f.Add([]byte("index,n,end_ms,min_ms,median_ms,max_ms,regime\n1,2,3,4,5,6,\"x\"y\n"), uint8(0))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		p := filepath.Join(dir, "f.csv")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var err error
		if mode%2 == 0 {
			var pts []SeriesPoint
			pts, err = readSeries(p)
			if err == nil {
				_ = Regions(pts)
				_, _ = rebound(pts, 7)
			}
		} else {
			_, err = readWindows(p)
		}
		if err != nil && !strings.Contains(err.Error(), p) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// FuzzParseBudgets: --fail-on either parses, and then its budgets print as
// a spec that parses back to the same budgets, or it is refused with the
// valid forms.
func FuzzParseBudgets(f *testing.F) {
	for _, s := range []string{"p95=+10%,errors=+0.01,ttss=+20%", "p99.9=5", "p95", "p95=-1%", "p95=NaN", "p95=1e400", "=,", "p50=+0x1p-2%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		bs, err := ParseBudgets(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "--fail-on") || !strings.Contains(err.Error(), "valid forms") {
				t.Fatalf("error without the option or the valid forms: %v", err)
			}
			return
		}
		parts := make([]string, len(bs))
		for i, b := range bs {
			parts[i] = b.String()
		}
		again, err := ParseBudgets(strings.Join(parts, ","))
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", spec, strings.Join(parts, ","), err)
		}
		if len(again) != len(bs) {
			t.Fatalf("round trip: %v != %v", again, bs)
		}
		for i := range bs {
			if again[i] != bs[i] {
				t.Fatalf("round trip: %v != %v", again[i], bs[i])
			}
		}
	})
}
