// Command k6 is a k6 binary with the xk6-regime extension built in, built
// with a plain `go build` (xk6 users get the same with
// `xk6 build --with github.com/xk6-regime/xk6-regime=.`).
package main

import (
	"os"

	k6cmd "go.k6.io/k6/v2/cmd"

	_ "github.com/xk6-regime/xk6-regime" // the registrations (register.go)
)

func main() {
	// k6 sends a usage report to stats.grafana.org at the end of every run
	// unless told not to; this binary's runs talk to the service under test
	// only. K6_NO_USAGE_REPORT=false turns the report back on (the variable
	// is set here, so it overrides a config file's noUsageReport).
	if _, set := os.LookupEnv("K6_NO_USAGE_REPORT"); !set {
		_ = os.Setenv("K6_NO_USAGE_REPORT", "true")
	}
	// k6 v2 also provisions a binary from Grafana's build service
	// (K6_BUILD_SERVICE_URL, by default https://ingest.k6.io) when a script
	// imports an extension this binary lacks, or for an unknown `k6 x`
	// command: traffic beyond the service under test, and another binary
	// than this one running the test. Off here unless
	// K6_AUTO_EXTENSION_RESOLUTION=true asks for it; such a script fails
	// with k6's error naming the missing extension.
	if _, set := os.LookupEnv("K6_AUTO_EXTENSION_RESOLUTION"); !set {
		_ = os.Setenv("K6_AUTO_EXTENSION_RESOLUTION", "false")
	}
	k6cmd.Execute()
}
