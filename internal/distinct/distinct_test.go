package distinct

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCounter(t *testing.T) {
	t.Parallel()
	c := New(100, 3)
	for i := range 1000 {
		c.Add(fmt.Sprint(i % 50))
	}
	n, exact := c.Distinct()
	require.Equal(t, 50, n)
	require.True(t, exact)
	require.EqualValues(t, 1000, c.Occurrences())
	require.Equal(t, []string{"0", "1", "2"}, c.Examples())
	for i := range 1000 {
		c.Add(fmt.Sprint("x", i))
	}
	n, exact = c.Distinct()
	require.Equal(t, 100, n, "a lower bound at the limit")
	require.False(t, exact)
	require.EqualValues(t, 2000, c.Occurrences())
}
