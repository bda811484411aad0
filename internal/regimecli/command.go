// Package regimecli is `k6 x regime`, the offline tools of xk6-regime:
// detect (CSV replay through the detector, internal/detectcli) and the
// commands on results folders (merge, report, compare, gate, history,
// profile). It knows nothing of a running test: the extension registers
// it with k6.
package regimecli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
		SilenceUsage:  true,
		SilenceErrors: true,
		// under `k6 x`, cobra does not refuse an unknown word itself: a
		// mistyped command must not exit 0 with the help on stdout (where
		// `history > h.csv` would take it for the CSV)
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "help" {
				return nil // RunE prints the help asked for
			}
			msg := fmt.Sprintf("unknown command %q for \"k6 x regime\"", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
			}
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return troubleError(fmt.Errorf("%s; the commands: %s", msg, strings.Join(names, ", ")))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// `k6 x regime help [command]`, as k6's own help reads
			if len(args) > 1 {
				sub, _, err := cmd.Find(args[1:])
				if err != nil || sub == cmd {
					return troubleError(fmt.Errorf("help: unknown command %q for \"k6 x regime\"", strings.Join(args[1:], " ")))
				}
				return sub.Help()
			}
			return cmd.Help()
		},
	}
	root.SuggestionsMinimumDistance = 2
	// a bad flag of any subcommand is a usage error: exit status 2
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return troubleError(err) })
	root.AddCommand(detectcli.NewCommand(gs.Stdout, gs.Stderr))
	root.AddCommand(resultsCommands(gs)...)
	onceFlags(root)
	return root
}

// onceFlags makes every single-valued flag of cmd and its subcommands
// refuse a second value: pflag keeps the last one silently, so
// `gate --scenario a --scenario b` would judge b alone with nothing said.
// Flags that take several values (string arrays, such as --budget) and
// switches (bool) are left as they are.
func onceFlags(cmd *cobra.Command) {
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		switch f.Value.Type() {
		case "bool", "stringArray", "stringSlice":
			return
		}
		if _, ok := f.Value.(*onceValue); !ok {
			f.Value = &onceValue{Value: f.Value}
		}
	})
	for _, c := range cmd.Commands() {
		onceFlags(c)
	}
}

// onceValue is a flag value that may be set once.
type onceValue struct {
	pflag.Value
	set   bool
	first string
}

func (o *onceValue) Set(v string) error {
	if o.set {
		return fmt.Errorf("given twice (%q, then %q): give it once", o.first, v)
	}
	if err := o.Value.Set(v); err != nil {
		return err
	}
	o.set, o.first = true, v
	return nil
}
