package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xk6-regime/xk6-regime/test/pgtest"
)

// startTimeout is how long a service may take to answer HTTP after it is
// started.
const startTimeout = 60 * time.Second

// Service is a real server the harness starts for one run and stops after it.
type Service struct {
	// Name identifies the service in tables ("go-flat", "jvm-sha", ...).
	Name string
	// Kind is the program: "gosvc", "node", "python", "pypy", "jvm" or
	// "demo" ("pypy" is the Python service under PyPy's tracing JIT).
	Kind string
	// Args are the program's own flags (gosvc -mode ..., jvm --mix ...).
	Args []string
	// Postgres starts a throw-away PostgreSQL cluster for the service: the
	// demo gets its URL as DATABASE_URL, the Python service as --pg URL
	// (under the interpreter that has psycopg2).
	Postgres bool
	// Workload is the k6 script's WORKLOAD: "get" or "demo".
	Workload string
}

// Env is where the harness finds its programs: the k6 binary under test, the
// demo service, the repository (for the services' sources and the script)
// and a folder for what it builds.
type Env struct {
	K6    string
	Demo  string
	Repo  string
	Build string // built services: gosvc, jvm classes
	// pgPython is the Python interpreter that imports psycopg2 (Prepare).
	pgPython string
	// Logf receives progress lines (nil: silent).
	Logf func(format string, args ...any)
}

func (e *Env) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

// Prepare builds what the services need (once): the Go service and the JVM
// classes, and checks that node, java, k6 and the demo service exist. Every
// missing piece is an error that names it and how to get it.
func (e *Env) Prepare(ctx context.Context, services []Service) error {
	var errs []error
	if _, err := os.Stat(e.K6); err != nil {
		errs = append(errs, fmt.Errorf("k6 binary %s: %w (build it with: make build)", e.K6, err))
	}
	if err := os.MkdirAll(e.Build, 0o755); err != nil {
		return err
	}
	kinds := map[string]bool{}
	for _, s := range services {
		kinds[s.Kind] = true
		if s.Postgres && pgtest.BinDir() == "" {
			errs = append(errs, errors.New("service "+s.Name+" needs PostgreSQL server binaries (initdb, postgres): "+
				"apt-get install -y postgresql (make deps)"))
		}
	}
	if kinds["gosvc"] {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(e.Build, "gosvc"), "./live/services/gosvc")
		cmd.Dir = e.Repo
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("building live/services/gosvc: %w\n%s", err, out))
		}
	}
	if kinds["jvm"] {
		if _, err := exec.LookPath("javac"); err != nil {
			errs = append(errs, errors.New("the JVM services need a JDK (javac, java): apt-get install -y default-jdk-headless (make deps)"))
		} else {
			cmd := exec.CommandContext(ctx, "javac", "-d", filepath.Join(e.Build, "jvm"), "live/services/jvm/LiveServer.java")
			cmd.Dir = e.Repo
			if out, err := cmd.CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("compiling live/services/jvm/LiveServer.java: %w\n%s", err, out))
			}
		}
	}
	if kinds["python"] {
		if _, err := exec.LookPath("python3"); err != nil {
			errs = append(errs, errors.New("the Python service needs python3 on PATH (Debian: apt-get install -y python3)"))
		}
	}
	for _, s := range services {
		if s.Kind == "python" && s.Postgres && e.pgPython == "" {
			if e.pgPython = psycopgPython(ctx); e.pgPython == "" {
				errs = append(errs, errors.New("service "+s.Name+" needs psycopg2 in python3 on PATH or /usr/bin/python3 "+
					"(Debian: apt-get install -y python3-psycopg2; make deps)"))
			}
		}
	}
	if kinds["pypy"] {
		if _, err := exec.LookPath("pypy3"); err != nil {
			errs = append(errs, errors.New("the PyPy service needs pypy3 on PATH (Debian: apt-get install -y pypy3; make deps)"))
		}
	}
	if kinds["node"] {
		if _, err := exec.LookPath("node"); err != nil {
			errs = append(errs, errors.New("the Node service needs node on PATH (Debian: apt-get install -y nodejs)"))
		}
	}
	if kinds["demo"] {
		if _, err := os.Stat(e.Demo); err != nil {
			errs = append(errs, fmt.Errorf("demo service %s: %w (build it with: make build-demo)", e.Demo, err))
		}
	}
	return errors.Join(errs...)
}

// psycopgPython is the first of python3 on PATH and Debian's
// /usr/bin/python3 that imports psycopg2 ("" if neither does): Debian's
// python3-psycopg2 is installed for its own interpreter, which a pyenv on
// PATH hides.
func psycopgPython(ctx context.Context) string {
	var cands []string
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3")
	for _, p := range cands {
		cmd := exec.CommandContext(ctx, p, "-c", "import psycopg2")
		cmd.Env = baseEnv()
		if cmd.Run() == nil {
			return p
		}
	}
	return ""
}

// running is a started service.
type running struct {
	addr string // host:port of its HTTP listener
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error // the process's exit, once done is closed
	pg   func() error
}

// lockedBuffer collects a child's output while the harness reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// listeningRE finds the address a service bound (each is started on port
// 0 and prints it: no port is picked free and then lost to another process
// before the service binds it); the demo service logs it as slog text.
var listeningRE = regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)|msg="demo service listening" http=http://(127\.0\.0\.1:\d+) `)

// boundAddr returns the address a service's output says it listens on, or
// "" before it said so.
func boundAddr(out string) string {
	if m := listeningRE.FindStringSubmatch(out); m != nil {
		return m[1] + m[2]
	}
	return ""
}

// start launches a service and waits (bounded) until it answers HTTP.
func (e *Env) start(ctx context.Context, s Service) (*running, error) {
	r := &running{log: &lockedBuffer{}, done: make(chan struct{})}
	var name string
	var args []string
	var env []string
	health := "/health"
	switch s.Kind {
	case "gosvc":
		name, args = filepath.Join(e.Build, "gosvc"), append([]string{"-addr", "127.0.0.1:0"}, s.Args...)
	case "node":
		name, args = "node", append([]string{filepath.Join(e.Repo, "live/services/node/server.js"), "--port", "0"}, s.Args...)
	case "python":
		name, args = "python3", append([]string{filepath.Join(e.Repo, "live/services/python/server.py"), "--port", "0"}, s.Args...)
		if s.Postgres {
			if e.pgPython == "" {
				return nil, fmt.Errorf("service %s: no Python with psycopg2 (Prepare finds it)", s.Name)
			}
			url, stop, err := pgtest.StartCluster()
			if err != nil {
				return nil, fmt.Errorf("service %s: starting PostgreSQL: %w", s.Name, err)
			}
			r.pg = stop
			name, args = e.pgPython, append(args, "--pg", url)
		}
	case "pypy":
		name, args = "pypy3", append([]string{filepath.Join(e.Repo, "live/services/python/server.py"), "--port", "0"}, s.Args...)
	case "jvm":
		// nodelay: the JDK's server writes a response's headers and its
		// body apart, and with Nagle's algorithm on, a closed loop's next
		// request waited for the client's delayed ACK: every request of the
		// closed cases took 44 ms, a TCP floor that hid the JIT (JDK-6968351)
		name, args = "java", append([]string{"-Xmx256m", "-Dsun.net.httpserver.nodelay=true", "-cp", filepath.Join(e.Build, "jvm"), "LiveServer", "--port", "0"}, s.Args...)
	case "demo":
		health = "/healthz"
		name, args = e.Demo, append([]string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, s.Args...)
		if s.Postgres {
			url, stop, err := pgtest.StartCluster()
			if err != nil {
				return nil, fmt.Errorf("service %s: starting PostgreSQL: %w", s.Name, err)
			}
			r.pg = stop
			env = append(env, "DATABASE_URL="+url)
		}
	default:
		return nil, fmt.Errorf("service %s: unknown kind %q (valid: gosvc, node, python, pypy, jvm, demo)", s.Name, s.Kind)
	}
	r.cmd = exec.Command(name, args...) //nolint:gosec // the harness's own services
	r.cmd.Env = append(baseEnv(), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	// a group of its own (stop signals it whole); killed with the harness,
	// should the harness die without stopping it (a test's timeout panic)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		r.stopPG()
		return nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()

	deadline := time.Now().Add(startTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if r.addr == "" {
			r.addr = boundAddr(r.log.String())
		}
		if r.addr != "" {
			resp, err := client.Get("http://" + r.addr + health)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return r, nil
				}
			}
		}
		select {
		case <-r.done:
			r.stopPG()
			return nil, fmt.Errorf("service %s exited before it answered (%v); its output:\n%s", s.Name, r.err, tail(r.log.String(), 2000))
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling an external process's readiness, bounded by deadline
		}
		if time.Now().After(deadline) {
			r.stop()
			if r.addr == "" {
				return nil, fmt.Errorf("service %s did not print the address it listens on within 60 s; its output:\n%s", s.Name, tail(r.log.String(), 2000))
			}
			return nil, fmt.Errorf("service %s did not answer http://%s%s within 60 s; its output:\n%s", s.Name, r.addr, health, tail(r.log.String(), 2000))
		}
	}
}

// stop ends the service (SIGTERM to its process group, SIGKILL after 10 s)
// and its PostgreSQL cluster.
func (r *running) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		select {
		case <-r.done:
		default:
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
				select {
				case <-r.done:
				case <-time.After(10 * time.Second): // a process that outlives SIGKILL: leave it to the OS
				}
			}
		}
	}
	r.stopPG()
}

// exited returns an error when the service's process ended before the
// harness stopped it (a crash during the run), with its output.
func (r *running) exited() error {
	select {
	case <-r.done:
		return fmt.Errorf("service exited during the run (%v); its output:\n%s", r.err, tail(r.log.String(), 2000))
	default:
		return nil
	}
}

func (r *running) stopPG() {
	if r.pg != nil {
		if err := r.pg(); err != nil {
			// a postmaster left running holds its port and data: say so
			fmt.Fprintf(os.Stderr, "live: stopping the service's PostgreSQL: %v\n", err)
		}
		r.pg = nil
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// bufferedLines splits text into lines (for scanning k6's log).
func bufferedLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// baseEnv is the environment of the harness's children (services, k6): the
// caller's PATH, HOME, temporary folder, locale, time zone and user, and
// nothing else. Any other variable of the caller's could change what a run
// measures: K6_REGIME_PROFILE judges every run with a profile, K6_OUT exports
// its metrics (and K6_* sets k6's options), DATABASE_URL and DEMO_* turn the
// embedded demo into another service, JAVA_TOOL_OPTIONS and NODE_OPTIONS
// change the JIT's warm-up.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "HOME", "TMPDIR", "TZ", "LANG", "LANGUAGE", "USER", "LOGNAME":
			env = append(env, kv)
		default:
			if strings.HasPrefix(k, "LC_") {
				env = append(env, kv)
			}
		}
	}
	return env
}
