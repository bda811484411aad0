// Package packaging checks how the project ships: the files an xk6 user,
// a CI job and a Kubernetes cluster take from this repository.
package packaging

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/test/testbin"
)

// TestCopiesIdentical: files kept in two places on purpose are byte for
// byte the same. The demo service is a Go module of its own, so it cannot
// import the root module's test/pgtest (and the root must not require
// the demo's module graph); the scenario kit ships its own copy of the
// demo's gRPC schema, so that the kit runs (and archives) without demo/.
func TestCopiesIdentical(t *testing.T) {
	t.Parallel()
	root := testbin.RepoRoot(t)
	for _, pair := range [][2]string{
		{"test/pgtest/pgtest.go", "demo/internal/pgtest/pgtest.go"},
		{"demo/proto/events.proto", "scenarios/proto/events.proto"},
	} {
		a, err := os.ReadFile(filepath.Join(root, pair[0]))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(root, pair[1]))
		require.NoError(t, err)
		require.NotEmpty(t, a)
		require.Equal(t, string(a), string(b), "%s and %s must stay identical: copy one over the other", pair[0], pair[1])
	}
}
