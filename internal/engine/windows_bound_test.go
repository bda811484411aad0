package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/detector"
)

// TestRecordedWindowsThinned: past maxRecordedWindows the recorder keeps
// one window in 2, 4, ... of every scope, over the whole run (its end is
// not lost), whatever the interleaving of the scopes, and counts every
// window it does not keep.
func TestRecordedWindowsThinned(t *testing.T) {
	t.Parallel()
	r := newRecorder(0)
	// the scenario's windows and two endpoints', interleaved 1:1:2
	total := map[string]int{}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	closeWindow := func(endpoint string) {
		seq := total[endpoint]
		total[endpoint]++
		at := t0 + int64(seq)*int64(time.Second)
		r.Window("load", endpoint, detector.Window{Seq: seq, First: detector.Point{Index: int64(seq) * 50, Time: at},
			Last: detector.Point{Index: int64(seq)*50 + 49, Time: at + 999}, N: 50, Median: 1, Tail: 2})
	}
	for range 3*maxRecordedWindows/2 + 7 {
		closeWindow("")
		closeWindow("/a")
		closeWindow("/b")
		closeWindow("/b")
	}
	all := 0
	for _, n := range total {
		all += n
	}
	require.Greater(t, all, 4*maxRecordedWindows)
	require.LessOrEqual(t, len(r.windows), maxRecordedWindows)
	require.Equal(t, int64(all), int64(len(r.windows))+r.windowsDropped, "every window kept or counted")
	s := r.windowStride
	require.GreaterOrEqual(t, s, int64(4))
	require.Zero(t, s&(s-1), "a power of two")
	kept := map[string][]int{}
	for _, w := range r.windows {
		kept[w.Endpoint] = append(kept[w.Endpoint], w.Seq)
	}
	for ep, n := range total {
		seqs := kept[ep]
		require.NotEmpty(t, seqs, ep)
		for i, q := range seqs {
			require.Equal(t, i*int(s), q, "%s: the multiples of the stride, in order", ep)
		}
		require.Greater(t, seqs[len(seqs)-1], n-1-int(s), "%s: the end of the run is kept", ep)
	}
}
