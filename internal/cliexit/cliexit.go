// Package cliexit gives the errors of the `k6 x regime` commands their exit
// status: k6 exits with the status an error carries (errext), and with 255
// for an error without one.
package cliexit

import (
	"github.com/spf13/cobra"
	"go.k6.io/k6/v2/errext"
	"go.k6.io/k6/v2/errext/exitcodes"
)

// Usage is the status of a usage error (a bad flag, option value or
// argument), and of trouble with the input for the commands on results
// folders (as diff's 2).
const Usage = 2

// With marks err with exit status code (unless it has one).
func With(err error, code int) error {
	return errext.WithExitCodeIfNone(err, exitcodes.ExitCode(code)) //nolint:gosec // small constants
}

// Args makes a cobra argument check's error exit with status code.
func Args(check cobra.PositionalArgs, code int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return With(err, code)
		}
		return nil
	}
}
