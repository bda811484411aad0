package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/test/testbin"
)

const modulePath = "github.com/xk6-regime/xk6-regime"

// extensionLine is how xk6 lint (v1.4.5, internal/lint/state.go) reads an
// extension from `k6 version`: "  MODULE VERSION, IMPORT [TYPE]". Its
// build check passes when one line matches, and it treats the extension as
// a JS one (running the smoke, examples and types checks) when the first
// matching line's type is js.
var extensionLine = regexp.MustCompile(`  (?P<module>[^ ]+) (?P<version>[^,]+), (?P<import>[^ ]+) \[(?P<type>[^\]]+)\]`)

// goCmd runs the go command in dir with the environment xk6 uses (its own
// work module, no workspace), bounded in time.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// the go that runs these tests (make test's GO=/path/to/go need not be
	// on PATH): $GO, else the GOROOT this test binary was built with
	gocmd := os.Getenv("GO")
	if gocmd == "" {
		gocmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(ctx, gocmd, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// k6Version is the go.k6.io/k6/v2 version that go.mod requires.
func k6Version(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*go\.k6\.io/k6/v2 (v\S+)`).FindSubmatch(b)
	require.NotNil(t, m, "go.mod requires go.k6.io/k6/v2")
	return string(m[1])
}

// TestXk6Build does what `xk6 build --with github.com/xk6-regime/xk6-regime=.`
// (xk6 v1.4.5, through k6foundry's native build) does, with plain go
// commands: a throwaway module "k6" with a main calling k6's cmd.Execute,
// k6 required at go.mod's version, a file blank-importing this module's
// root package, the module replaced by this checkout, `go mod tidy
// -compat=1.17` after each step, `go build`. Then `k6 version` must list
// the three registrations under this module's path, as xk6 lint's build
// check reads them, and the smoke test must pass as xk6 lint's smoke check
// runs it (with --summary-mode=disabled: k6 v2 removed --no-summary).
func TestXk6Build(t *testing.T) {
	root := testbin.RepoRoot(t)
	work := t.TempDir()
	goCmd(t, work, "mod", "init", "k6")
	require.NoError(t, os.WriteFile(filepath.Join(work, "main.go"), []byte(`package main

import (
	k6cmd "go.k6.io/k6/v2/cmd"
)

func main() {
	k6cmd.Execute()
}
`), 0o600))
	goCmd(t, work, "mod", "edit", "-require", "go.k6.io/k6/v2@"+k6Version(t, root))
	goCmd(t, work, "mod", "tidy", "-compat=1.17")
	require.NoError(t, os.WriteFile(filepath.Join(work, strings.ReplaceAll(modulePath, "/", "_")+".go"),
		[]byte("package main\n\nimport _ \""+modulePath+"\"\n"), 0o600))
	goCmd(t, work, "mod", "edit", "-replace", modulePath+"="+root)
	goCmd(t, work, "mod", "tidy", "-compat=1.17")
	exe := filepath.Join(work, "k6")
	goCmd(t, work, "build", "-o", exe, ".")

	// the module graph of a user's build: k6 and what the extension imports,
	// nothing of the demo service
	graph := goCmd(t, work, "mod", "graph")
	require.NotContains(t, graph, "github.com/jackc/pgx", "the demo service's database driver entered the extension's module graph")

	out, err := exec.Command(exe, "version").CombinedOutput()
	require.NoError(t, err, string(out))
	got := map[string]string{}
	first := ""
	for _, line := range strings.Split(string(out), "\n") {
		m := extensionLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if first == "" {
			first = m[4]
		}
		require.Equal(t, modulePath, m[1], "module path of %q", line)
		require.Equal(t, "(devel)", m[2], "a directory replacement is (devel): %q", line)
		got[m[3]] = m[4]
	}
	require.Equal(t, map[string]string{"k6/x/regime": "js", "regime": "subcommand", "xk6-regime-influxdb": "output"}, got, string(out))
	require.Equal(t, "js", first, "xk6 lint reads the first line's type to decide the extension is a JS one")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	smoke := exec.CommandContext(ctx, exe, "run", "--no-usage-report", "--summary-mode=disabled", "--quiet",
		filepath.Join(root, "test", "smoke.test.js"))
	smoke.Dir = work
	smoke.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true")
	sout, err := smoke.CombinedOutput()
	require.NoError(t, err, "test/smoke.test.js:\n%s", sout)
}

// TestXk6LintStatic checks, without xk6, what xk6 lint --preset strict
// checks from files alone: a go.mod without replace directives (the
// "replace" check), a README, the license, index.d.ts at the root
// ("types"), an examples/ folder with files ("examples") and a smoke test
// where the "smoke" check looks (the root, test/, tests/, examples/,
// scripts/). The license is recognised by xk6 with go-license-detector,
// which this test does not run: it checks the file is the Apache-2.0 text.
func TestXk6LintStatic(t *testing.T) {
	t.Parallel()
	root := testbin.RepoRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.NotRegexp(t, `(?m)^\s*replace\b`, string(mod), "xk6 lint's replace check fails on any replace directive")
	require.Regexp(t, `(?m)^module `+regexp.QuoteMeta(modulePath)+`$`, string(mod))
	for _, f := range []string{"README.md", "index.d.ts", "test/smoke.test.js", "examples/tagging.js"} {
		require.FileExists(t, filepath.Join(root, f))
	}
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	require.NoError(t, err)
	require.Contains(t, string(lic), "Apache License\n                           Version 2.0, January 2004")
	require.Contains(t, string(lic), "END OF TERMS AND CONDITIONS")
}
