// Package testbin gives end-to-end tests the binaries built from this
// repository: k6 with the extension and the demo service (its own Go
// module, demo/), taken from $K6_BIN / $DEMO_BIN (make test builds them
// first) or built once per test process.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// RepoRoot is the module root.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(tb, ok)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

type binary struct {
	// dir is the module directory (relative to the repository root) that
	// pkg is built in
	env, dir, pkg, name string
	once                sync.Once
	path                string
	err                 error
}

var (
	k6    = &binary{env: "K6_BIN", dir: ".", pkg: "./cmd/k6", name: "k6"}
	stock = &binary{env: "K6_STOCK_BIN", dir: ".", pkg: "./cmd/k6-stock", name: "k6-stock"}
	demo  = &binary{env: "DEMO_BIN", dir: "demo", pkg: "./cmd/demo-service", name: "demo-service"}
)

// K6 returns the k6 binary with the extension.
func K6(tb testing.TB) string { tb.Helper(); return k6.get(tb) }

// Stock returns the same k6 without the extension (cmd/k6-stock).
func Stock(tb testing.TB) string { tb.Helper(); return stock.get(tb) }

// Demo returns the demo service binary.
func Demo(tb testing.TB) string { tb.Helper(); return demo.get(tb) }

func (b *binary) get(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(b.env); p != "" {
		abs, err := filepath.Abs(p)
		require.NoError(tb, err)
		return abs
	}
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "xk6-regime-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		cmd.Dir = filepath.Join(RepoRoot(tb), b.dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %w\n%s", b.pkg, err, out)
		}
	})
	require.NoError(tb, b.err)
	return b.path
}

// Buffer is a bytes.Buffer safe for a child process's output copier writing
// it while the test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
