// Command k6 is a k6 binary with the xk6-regime extension built in.
package main

import (
	k6cmd "go.k6.io/k6/v2/cmd"
)

func main() {
	k6cmd.Execute()
}
