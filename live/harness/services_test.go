package harness

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestServicesAnswer starts every handler mix of the JVM, Node and CPython
// services (the get workload, without PostgreSQL), asks each for the work
// the k6 script asks for, and stops it: a service that no longer starts or
// answers fails here, not an hour into `make live`. The Python service on
// SQLite must also remove its database's folder when it is stopped.
func TestServicesAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real services")
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..")
	var services []Service
	seen := map[string]bool{}
	for _, c := range KnownCases() {
		s := c.Service
		if seen[s.Name] || s.Postgres || s.Workload == "demo" || (s.Kind != "jvm" && s.Kind != "node" && s.Kind != "python") {
			continue
		}
		seen[s.Name] = true
		services = append(services, s)
	}
	for _, want := range []string{"jvm-sha", "jvm-mixed", "jvm-maps", "jvm-alloc", "node", "node-text", "node-md", "python", "python-sqlite"} {
		if !seen[want] {
			t.Errorf("service %s is not among the cases' services", want)
		}
	}
	for _, tool := range []string{"javac", "java", "node", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" { // make deps installs them: in CI their absence is a failure
				t.Fatalf("%s not on PATH (make deps installs it)", tool)
			}
			t.Skipf("%s not on PATH (make deps installs it)", tool)
		}
	}
	// Prepare checks that the k6 binary exists; this test runs none
	k6 := filepath.Join(t.TempDir(), "k6")
	if err := os.WriteFile(k6, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &Env{Repo: repo, Build: t.TempDir(), K6: k6}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := e.Prepare(ctx, services); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, s := range services {
		t.Run(s.Name, func(t *testing.T) {
			before, _ := filepath.Glob(filepath.Join(os.TempDir(), "live-sqlite-*"))
			r, err := e.start(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				resp, err := client.Get("http://" + r.addr + "/work?n=1")
				if err != nil {
					r.stop()
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				var v map[string]any
				if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil || len(v) == 0 {
					r.stop()
					t.Fatalf("GET /work: status %d, body %q (want 200 and a JSON object)", resp.StatusCode, b)
				}
			}
			r.stop()
			if err := r.exited(); err == nil {
				t.Fatal("the service still runs after stop")
			}
			after, _ := filepath.Glob(filepath.Join(os.TempDir(), "live-sqlite-*"))
			if len(after) > len(before) {
				t.Errorf("%s left its SQLite folder behind: %v (before: %v)", s.Name, after, before)
			}
		})
	}
}
