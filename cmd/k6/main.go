// Command k6 is a k6 binary with the xk6-regime extension built in, built
// with a plain `go build` (xk6 users get the same with
// `xk6 build --with github.com/xk6-regime/xk6-regime=.`).
package main

import (
	k6cmd "go.k6.io/k6/v2/cmd"

	_ "github.com/xk6-regime/xk6-regime" // the registrations (register.go)
)

func main() {
	k6cmd.Execute()
}
