package influx

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xk6-regime/xk6-regime/test/testbin"
)

const hangScript = `
import http from 'k6/http';
import regime from 'k6/x/regime';
export const options = { scenarios: { api: { executor: 'constant-vus', vus: 2, duration: '60s' } } };
export default function () { http.get(__ENV.BASE_URL); }
export function handleSummary() {
  regime.saveResults({ dir: __ENV.OUT, required: true });
  return {};
}
`

// TestResultsBeforeAHangingInflux: k6 stops its outputs before
// handleSummary. With an InfluxDB that accepts connections and never
// answers, a SIGTERM used to leave the results folder unwritten until the
// output had waited out its stopTimeout, and a SIGKILL within that wait
// (docker stop: 10 s after the SIGTERM) lost it. The output now waits at
// k6's Exit event, after handleSummary: the folder, saying the run was
// interrupted, exists while k6 still waits for InfluxDB.
func TestResultsBeforeAHangingInflux(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})
	srv := newColdServer(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "results")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.js"), []byte(hangScript), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// stopTimeout 60s: k6 waits for InfluxDB far longer than the folder takes
	cmd := exec.CommandContext(ctx, k6Binary(t), "run", "--no-usage-report", "--quiet", "--log-format", "raw",
		"--out", "xk6-regime-influxdb=http://"+ln.Addr().String()+"/k6?stopTimeout=60s&timeout=30s", "script.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true", "BASE_URL="+srv.URL, "OUT="+out)
	// read while k6 writes it
	stderr := &testbin.Buffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		deadline := time.Now().Add(limit)
		for !ok() {
			select {
			case <-exited:
				t.Fatalf("k6 exited before %s; stderr:\n%s", what, stderr.String())
			default:
			}
			require.True(t, time.Now().Before(deadline), "no %s within %s; stderr:\n%s", what, limit, stderr.String())
			time.Sleep(50 * time.Millisecond) // polling an external process's progress
		}
	}
	// load, and a write in flight to the hanging server
	waitFor("write to the hanging InfluxDB", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) > 0
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var summary string
	waitFor("results folder", 30*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(out, "*", "summary.json"))
		if len(m) == 0 {
			return false
		}
		summary = m[0]
		b, err := os.ReadFile(summary)
		return err == nil && bytes.Contains(b, []byte(`"exit_code"`)) // updated at k6's Exit
	})
	select {
	case <-exited:
		t.Fatalf("k6 exited before the test could see it waiting for InfluxDB; stderr:\n%s", stderr.String())
	default:
	}
	var s struct {
		End struct {
			Status   string `json:"status"`
			Signal   string `json:"signal"`
			ExitCode *int   `json:"exit_code"`
		} `json:"end"`
	}
	b, err := os.ReadFile(summary)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &s))
	require.Equal(t, "interrupted", s.End.Status)
	require.Equal(t, "SIGTERM", s.End.Signal)
	require.NotNil(t, s.End.ExitCode)
	require.Equal(t, 105, *s.End.ExitCode)
	// docker stop's SIGKILL: the folder stays
	require.NoError(t, cmd.Process.Kill())
	<-exited
	_, err = os.Stat(summary)
	require.NoError(t, err)
}
