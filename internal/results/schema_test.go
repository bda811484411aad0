package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadSummaryVersions: the tools read summary.json of every version
// from OldestSchemaVersion to SchemaVersion and refuse others, naming the
// versions they read.
func TestReadSummaryVersions(t *testing.T) {
	t.Parallel()
	run := synthRun(2000, DefaultSeriesLimit, 5)
	dir := t.TempDir()
	require.NoError(t, run.WriteDir(dir, WriteOptions{}))
	s, err := ReadSummary(dir)
	require.NoError(t, err)
	require.Equal(t, SchemaVersion, s.Schema, "a run writes the current version")
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	require.NoError(t, err)
	cur := fmt.Sprintf(`"schema": %d,`, SchemaVersion)
	require.Contains(t, string(b), cur)
	for v := range SchemaVersion + 3 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, SummaryFile), []byte(strings.Replace(string(b), cur, fmt.Sprintf(`"schema": %d,`, v), 1)), 0o600))
		s, err := ReadSummary(dir)
		if v >= OldestSchemaVersion && v <= SchemaVersion {
			require.NoError(t, err, "schema %d", v)
			require.Equal(t, v, s.Schema)
			continue
		}
		require.ErrorContains(t, err, fmt.Sprintf("schema version %d, this tool reads versions %d to %d", v, OldestSchemaVersion, SchemaVersion))
	}
	for v := OldestSchemaVersion + 1; v <= SchemaVersion; v++ {
		require.NotEmpty(t, SchemaChanges[v], "what changed in schema %d is said", v)
	}
}

// TestSchemaNote: folders of one version get no note; mixed ones get the
// folders of each version and what changed between them.
func TestSchemaNote(t *testing.T) {
	t.Parallel()
	one, two := &Summary{Schema: 1}, &Summary{Schema: 2}
	require.Empty(t, SchemaNote([]*Summary{two, two}, []string{"a", "b"}))
	require.Empty(t, SchemaNote([]*Summary{one}, []string{"a"}))
	note := SchemaNote([]*Summary{one, two, one, one, one, one}, []string{"a", "b", "c", "d", "e", "f"})
	require.Contains(t, note, "schema 1: a, c, d and 2 more; schema 2: b;")
	require.Contains(t, note, "what changed in schema 2: "+SchemaChanges[2])
}

// TestMergeSchemaOne: merging a schema-1 folder (its last new connection
// counted from the run's first request) leaves last_new_connection_ms
// null, with a warning that names it; folders of the current version keep
// their largest.
func TestMergeSchemaOne(t *testing.T) {
	t.Parallel()
	load := func(seed uint64, schema int) *Run {
		run := synthRun(2000, DefaultSeriesLimit, seed)
		dir := t.TempDir()
		require.NoError(t, run.WriteDir(dir, WriteOptions{}))
		r, err := LoadDir(dir)
		require.NoError(t, err)
		r.Summary.Schema = schema
		last := float64(100 * seed)
		r.Summary.ConnectionColdStart["warmup"] = &ConnPhase{Requests: 10, NewConnections: 2, LastNewConnectionMs: &last}
		require.NotEmpty(t, r.Summary.Requests)
		for _, row := range r.Summary.Requests {
			row.LastNewConnectionMs = &last
		}
		return r
	}
	lastNull := func(m *Run) bool {
		for _, row := range m.Summary.Requests {
			if row.LastNewConnectionMs != nil {
				return false
			}
		}
		return m.Summary.ConnectionColdStart["warmup"].LastNewConnectionMs == nil
	}
	cur, err := Merge([]*Run{load(1, SchemaVersion), load(2, SchemaVersion)}, []string{"x", "y"})
	require.NoError(t, err)
	require.NotNil(t, cur.Summary.ConnectionColdStart["warmup"].LastNewConnectionMs)
	require.InDelta(t, 200, *cur.Summary.ConnectionColdStart["warmup"].LastNewConnectionMs, 1e-9)

	require.False(t, lastNull(cur))
	for _, row := range cur.Summary.Requests {
		require.InDelta(t, 200, *row.LastNewConnectionMs, 1e-9)
	}

	mixed, err := Merge([]*Run{load(3, 1), load(4, SchemaVersion)}, []string{"old", "new"})
	require.NoError(t, err)
	require.True(t, lastNull(mixed), "request rows and phases")
	require.Equal(t, SchemaVersion, mixed.Summary.Schema)
	js, err := json.Marshal(mixed.Summary.Warnings)
	require.NoError(t, err)
	require.Contains(t, string(js), "merged from folders of summary.json schema 1 (old)")

	allOld, err := Merge([]*Run{load(5, 1), load(6, 1)}, []string{"a", "b"})
	require.NoError(t, err)
	require.True(t, lastNull(allOld))

	// merged again, as written and read back, with a folder of the current
	// version: the null stays unknown, not none
	dir := t.TempDir()
	require.NoError(t, mixed.WriteDir(dir, WriteOptions{}))
	back, err := LoadDir(dir)
	require.NoError(t, err)
	again, err := Merge([]*Run{back, load(7, SchemaVersion)}, []string{"merged", "newer"})
	require.NoError(t, err)
	require.True(t, lastNull(again))
	js, err = json.Marshal(again.Summary.Warnings)
	require.NoError(t, err)
	require.Contains(t, string(js), "merged from folders of summary.json schema 1 (merged)")
}
