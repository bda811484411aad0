// Package regimecli is `k6 x regime`, the offline tools of xk6-regime:
// detect (CSV replay through the detector, internal/detectcli) and the
// commands on results folders (merge, report, compare, gate, history,
// profile). It knows nothing of a running test: the extension registers
// it with k6.
package regimecli

import (
	"github.com/spf13/cobra"
	"github.com/xk6-regime/xk6-regime/internal/detectcli"
	"go.k6.io/k6/v2/cmd/state"
)

// NewCommand builds `k6 x regime`, the offline tools of the extension.
func NewCommand(gs *state.GlobalState) *cobra.Command {
	root := &cobra.Command{
		Use:   "regime",
		Short: "Steady-state tools of xk6-regime",
		Long: "Offline tools of xk6-regime: replay measurement series through the same " +
			"steady-state detector the k6/x/regime module runs online.",
		SilenceUsage: true,
	}
	// a bad flag of any subcommand is a usage error: exit status 2
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return troubleError(err) })
	root.AddCommand(detectcli.NewCommand(gs.Stdout, gs.Stderr))
	root.AddCommand(resultsCommands(gs)...)
	return root
}
