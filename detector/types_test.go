package detector

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A regime's name reads back as the regime (JSON, text), and an unknown
// name is an error that lists the valid ones.
func TestRegimeNamesRoundTrip(t *testing.T) {
	t.Parallel()
	for i, name := range RegimeNames() {
		r, err := ParseRegime(name)
		require.NoError(t, err)
		require.Equal(t, Regime(i), r)
		require.Equal(t, name, r.String())
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var back Regime
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, r, back)
	}
	_, err := ParseRegime("hot")
	require.EqualError(t, err, `regime must be one of cold, warmup, steady, got "hot"`)
	var r Regime
	require.Error(t, json.Unmarshal([]byte(`"Steady"`), &r))
	require.Equal(t, "unknown", Regime(7).String())
}
