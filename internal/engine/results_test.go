package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/results"
)

// TestHistogramUnits: the histograms the extension keeps count in the
// results' unit, so copyHist shares their HDR counts as they are; one in
// another unit is refused, not copied with its values scaled wrong.
func TestHistogramUnits(t *testing.T) {
	t.Parallel()
	require.Equal(t, results.UnitMs, newDurationHistogram().Lowest())
	b := newBreakdown()
	require.Equal(t, results.UnitMs, b.cell(breakdownKey{scenario: "s"}).hist.Lowest())
	h := newDurationHistogram()
	h.Record(12.5)
	got := copyHist(h)
	require.InDelta(t, 12.5, got.Quantile(50), 0.05)
	other, err := detector.NewHistogram(1, 1e6, 3) // seconds, say
	require.NoError(t, err)
	require.PanicsWithValue(t, "copyHist: a histogram in units of 1 ms, not the results' 0.001 ms", func() { copyHist(other) })
}
