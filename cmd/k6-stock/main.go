// Command k6-stock is k6 of the same version without the extension: the
// baseline of `make bench`'s paired runs.
package main

import (
	k6cmd "go.k6.io/k6/v2/cmd"
)

func main() {
	k6cmd.Execute()
}
