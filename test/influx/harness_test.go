// Package influx runs the real k6 binary with k6's built-in InfluxDB output
// and the xk6-regime-influxdb output against a real InfluxDB OSS 1.8
// (built from the Go module proxy by scripts/influxd.sh) on 127.0.0.1, then
// runs every query of the Grafana dashboard against what they wrote.
package influx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/test/testbin"
)

// repoRoot is the module root.
func repoRoot(tb testing.TB) string { tb.Helper(); return testbin.RepoRoot(tb) }

var (
	influxdOnce sync.Once
	influxdPath string
	influxdErr  error
)

// k6Binary is $K6_BIN, else k6 built from this repository once per run.
func k6Binary(tb testing.TB) string { tb.Helper(); return testbin.K6(tb) }

// influxdBinary installs influxd v1.8.3 with scripts/influxd.sh (go install
// into .cache/bin, or $INFLUXD_GOBIN) and skips the test if that fails.
func influxdBinary(tb testing.TB) string {
	tb.Helper()
	influxdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(tb), "scripts", "influxd.sh"), "install")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			influxdErr = fmt.Errorf("%w\n%s", err, stderr.String())
			return
		}
		influxdPath = string(bytes.TrimSpace(stdout.Bytes()))
	})
	if influxdErr != nil {
		if os.Getenv("CI") != "" { // make deps installs it: in CI its absence is a failure
			tb.Fatalf("cannot install InfluxDB 1.8 (scripts/influxd.sh install): %v", influxdErr)
		}
		tb.Skipf("cannot install InfluxDB 1.8 with `go install github.com/influxdata/influxdb/cmd/influxd@v1.8.3` "+
			"(scripts/influxd.sh install): %v", influxdErr)
	}
	return influxdPath
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// influxd is one InfluxDB 1.8 server with a temp data dir, listening on
// 127.0.0.1 only.
type influxd struct {
	port int
	cmd  *exec.Cmd
	log  *testbin.Buffer
	done chan struct{}
}

func (s *influxd) url() string { return fmt.Sprintf("http://127.0.0.1:%d", s.port) }

// startInfluxd starts a server with scripts/influxd.sh's configuration and
// creates the database k6.
func startInfluxd(tb testing.TB) *influxd {
	tb.Helper()
	influxdBinary(tb)
	dir := tb.TempDir()
	s := &influxd{port: freePort(tb), log: &testbin.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(repoRoot(tb), "scripts", "influxd.sh"), "run", dir, strconv.Itoa(s.port))
	s.cmd.Env = append(os.Environ(), "INFLUXD_RPC_PORT="+strconv.Itoa(freePort(tb)))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	require.NoError(tb, s.cmd.Start())
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	tb.Cleanup(s.kill)

	// readiness of an external process: probe /ping, bounded
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url() + "/ping")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				break
			}
		}
		select {
		case <-s.done:
			tb.Fatalf("influxd exited at start:\n%s", s.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		require.True(tb, time.Now().Before(deadline), "influxd not ready after 30s:\n%s", s.log.String())
	}
	s.query(tb, `CREATE DATABASE "k6"`)
	return s
}

// kill stops the server at once (SIGKILL, as a crash would).
func (s *influxd) kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.done
}

// series is one series of an InfluxQL answer.
type series struct {
	Name    string            `json:"name"`
	Tags    map[string]string `json:"tags"`
	Columns []string          `json:"columns"`
	Values  [][]any           `json:"values"`
}

// query runs one InfluxQL statement against database k6.
func (s *influxd) query(tb testing.TB, q string) []series {
	tb.Helper()
	out, err := s.ask(q)
	require.NoError(tb, err)
	return out
}

// ask runs one InfluxQL statement against database k6 and returns its
// series, or an error (for callers that must not fail the test, such as a
// goroutine polling a server that may be going down).
func (s *influxd) ask(q string) ([]series, error) {
	form := url.Values{"db": {"k6"}, "q": {q}, "epoch": {"ms"}}
	resp, err := http.PostForm(s.url()+"/query", form)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Results []struct {
			Series []series `json:"series"`
			Error  string   `json:"error"`
		} `json:"results"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	switch {
	case out.Error != "":
		return nil, fmt.Errorf("query %s: %s", q, out.Error)
	case len(out.Results) != 1:
		return nil, fmt.Errorf("query %s: %d results, want 1", q, len(out.Results))
	case out.Results[0].Error != "":
		return nil, fmt.Errorf("query %s: %s", q, out.Results[0].Error)
	}
	return out.Results[0].Series, nil
}

// count is the value of a single-value count query, 0 when the answer is
// empty or the server does not answer.
func (s *influxd) count(q string) float64 {
	out, err := s.ask(q)
	if err != nil || len(out) == 0 || len(out[0].Values) == 0 || len(out[0].Values[0]) < 2 {
		return 0
	}
	v, _ := out[0].Values[0][1].(float64)
	return v
}

// k6Result is what one k6 run left behind.
type k6Result struct {
	ExitCode int
	Stdout   string
	Stderr   string
	Elapsed  time.Duration
}

// runK6 runs `k6 run` on script, bounded in time; onStart runs once k6 has
// started.
func runK6(tb testing.TB, script string, env map[string]string, onStart func(), args ...string) k6Result {
	tb.Helper()
	dir := tb.TempDir()
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "script.js"), []byte(script), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"run", "--no-usage-report", "--log-format", "raw"}, args...)
	full = append(full, "script.js")
	cmd := exec.CommandContext(ctx, k6Binary(tb), full...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true", "K6_NO_COLOR=true")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	require.NoError(tb, cmd.Start())
	if onStart != nil {
		onStart()
	}
	err := cmd.Wait()
	res := k6Result{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(begin)}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		res.ExitCode = exitErr.ExitCode()
	} else {
		require.NoError(tb, err)
	}
	require.NoError(tb, ctx.Err(), "k6 run timed out; stderr:\n%s", res.Stderr)
	return res
}

// newColdServer answers after a latency that depends only on the request
// number: a cold start decaying from ~60 ms, a warm-up ramp, then steady
// at ~6 ms with jitter.
func newColdServer(tb testing.TB) *httptest.Server {
	tb.Helper()
	var n atomic.Int64
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 8))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := n.Add(1) - 1
		mu.Lock()
		jitter := rng.Float64() * 0.2
		mu.Unlock()
		steady := 6.0
		var ms float64
		switch {
		case i < 60:
			ms = steady + 60*math.Exp(-float64(i)/20)
		case i < 600:
			ms = steady * (2 - float64(i-60)/540)
		default:
			ms = steady
		}
		time.Sleep(time.Duration((ms + jitter) * float64(time.Millisecond))) // the simulated service time
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"i":%d}`, i)
	}))
	tb.Cleanup(srv.Close)
	return srv
}
