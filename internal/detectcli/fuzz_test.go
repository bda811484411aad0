package detectcli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDetectCSV feeds arbitrary bytes to detect as a CSV file (mode picks
// the flags: default column, --group/--column/--time, or gzip detection by
// name). Whatever the input: no panic, exit status 0 or 1, every stdout line
// a JSON object, every stderr line naming the file. The seed corpus is in
// testdata/fuzz/FuzzDetectCSV.
func FuzzDetectCSV(f *testing.F) {
	f.Add([]byte("value\n1\nx\"y\n"), uint8(0))
	f.Add([]byte("g,t,v\na,0,1\na,1,2\nb,0,NaN\n"), uint8(1))
	f.Add([]byte("g,t,v\na,0,1\na,0.5,1.5\nb,1,2\n"), uint8(1))
	f.Add([]byte("\x1f\x8b\x08\x00"), uint8(2))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		name := "in.csv"
		args := []string{"--window-min", "8", "--max-groups", "4"}
		switch mode % 3 {
		case 1:
			args = append(args, "--group", "g", "--column", "v", "--time", "t", "--time-unit", "ms")
		case 2:
			name = "in.csv.gz"
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := Run(append(args, path), &stdout, &stderr)
		if code != 0 && code != exitFileErrors {
			t.Fatalf("exit status %d; stderr: %s", code, stderr.String())
		}
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			if l != "" && !json.Valid([]byte(l)) {
				t.Fatalf("stdout line is not JSON: %q", l)
			}
		}
		for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			if l != "" && !strings.HasPrefix(l, "detect: "+path+": ") && !strings.HasPrefix(l, "detect: 1 of 1 files had errors") {
				t.Fatalf("stderr line does not name the file: %q", l)
			}
		}
	})
}
