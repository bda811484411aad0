package demo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// Config is the demo service's configuration. Defaults, then environment
// variables (DEMO_*, DATABASE_URL), then command-line flags.
type Config struct {
	HTTPAddr    string
	GRPCAddr    string
	AllowRemote bool
	// DatabaseURL selects PostgreSQL (pgx); empty means the embedded
	// simulated database.
	DatabaseURL     string
	PoolMax         int
	ConnSetup       time.Duration // simulated database only
	QueryTime       time.Duration // simulated database only
	RowTime         time.Duration // simulated database only
	AcquireTimeout  time.Duration
	CacheTTL        time.Duration
	CacheMaxPlayers int
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults: a remote-like database with a 40 ms
// connection setup and 1 ms queries, 20 connections at most, 100 ms to
// acquire one, caches kept 30 s.
func DefaultConfig() Config {
	return Config{
		HTTPAddr:        "127.0.0.1:8080",
		GRPCAddr:        "127.0.0.1:9090",
		PoolMax:         20,
		ConnSetup:       40 * time.Millisecond,
		QueryTime:       time.Millisecond,
		RowTime:         20 * time.Microsecond,
		AcquireTimeout:  100 * time.Millisecond,
		CacheTTL:        30 * time.Second,
		CacheMaxPlayers: 100_000,
		ShutdownTimeout: 10 * time.Second,
	}
}

type setting struct {
	flag, env, usage string
	ptr              any // *string, *bool, *int or *time.Duration
}

func (c *Config) settings() []setting {
	return []setting{
		{"http-addr", "DEMO_HTTP_ADDR", "HTTP listen address (loopback unless -allow-remote)", &c.HTTPAddr},
		{"grpc-addr", "DEMO_GRPC_ADDR", "gRPC listen address (loopback unless -allow-remote)", &c.GRPCAddr},
		{"allow-remote", "DEMO_ALLOW_REMOTE", "allow listening on non-loopback addresses", &c.AllowRemote},
		{"database-url", "DATABASE_URL", "PostgreSQL `URL` (pgx); empty = embedded simulated database", &c.DatabaseURL},
		{"pool-max", "DEMO_POOL_MAX", "most database connections (1-1000)", &c.PoolMax},
		{"conn-setup", "DEMO_CONN_SETUP", "time to open one simulated connection (0-10s)", &c.ConnSetup},
		{"query-time", "DEMO_QUERY_TIME", "time a simulated query holds its connection (0-1s)", &c.QueryTime},
		{"row-time", "DEMO_ROW_TIME", "extra simulated query time per row (0-100ms)", &c.RowTime},
		{"acquire-timeout", "DEMO_ACQUIRE_TIMEOUT", "longest wait for a database connection before answering 503 (1ms-30s)", &c.AcquireTimeout},
		{"cache-ttl", "DEMO_CACHE_TTL", "how long cached catalogue and player data stay fresh (0 disables caching, at most 24h)", &c.CacheTTL},
		{"cache-max-players", "DEMO_CACHE_MAX_PLAYERS", "most players kept in the cache (>= 16)", &c.CacheMaxPlayers},
		{"shutdown-timeout", "DEMO_SHUTDOWN_TIMEOUT", "longest wait for in-flight requests on shutdown (0-5m)", &c.ShutdownTimeout},
	}
}

// LoadConfig builds a Config from defaults, the environment (read through
// getenv) and args, and validates it. The error names every bad setting.
// flag.ErrHelp is returned for -h.
func LoadConfig(args []string, getenv func(string) string, usageOut io.Writer) (Config, error) {
	c := DefaultConfig()
	var errs []error
	for _, s := range c.settings() {
		v := getenv(s.env)
		if v == "" {
			continue
		}
		if err := setValue(s.ptr, v); err != nil {
			errs = append(errs, fmt.Errorf("environment %s=%q: %w", s.env, v, err))
		}
	}
	fs := flag.NewFlagSet("demo-service", flag.ContinueOnError)
	fs.SetOutput(usageOut)
	for _, s := range c.settings() {
		usage := s.usage + " (env " + s.env + ")"
		switch p := s.ptr.(type) {
		case *string:
			if p == &c.DatabaseURL {
				fs.Var(secretString{p}, s.flag, usage) // -h shows the default with its password hidden
				continue
			}
			fs.StringVar(p, s.flag, *p, usage)
		case *bool:
			fs.BoolVar(p, s.flag, *p, usage)
		case *int:
			fs.IntVar(p, s.flag, *p, usage)
		case *time.Duration:
			fs.DurationVar(p, s.flag, *p, usage)
		}
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q: the service takes flags only", fs.Args()))
	}
	errs = append(errs, c.Validate()...)
	return c, errors.Join(errs...)
}

// secretString is a string flag whose String (what -h prints as the
// default, from the environment) hides a password.
type secretString struct{ p *string }

func (s secretString) String() string {
	if s.p == nil {
		return ""
	}
	return redactPassword(*s.p)
}

func (s secretString) Set(v string) error { *s.p = v; return nil }

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)

// redactPassword hides the password of a database URL
// (postgres://user:xxxxx@host/db) or key=value DSN (password=xxxxx).
func redactPassword(v string) string {
	if u, err := url.Parse(v); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
	}
	return dsnPassword.ReplaceAllString(v, "${1}xxxxx")
}

func setValue(ptr any, v string) error {
	switch p := ptr.(type) {
	case *string:
		*p = v
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("want an integer")
		}
		*p = n
	case *time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New("want a duration like 40ms or 1.5s")
		}
		*p = d
	}
	return nil
}

// Validate reports every invalid setting, each naming its flag and the
// valid values.
func (c Config) Validate() []error {
	var errs []error
	for _, a := range []struct{ flag, addr string }{{"http-addr", c.HTTPAddr}, {"grpc-addr", c.GRPCAddr}} {
		if err := checkAddr(a.addr, c.AllowRemote); err != nil {
			errs = append(errs, fmt.Errorf("-%s %q: %w", a.flag, a.addr, err))
		}
	}
	if c.HTTPAddr == c.GRPCAddr && c.HTTPAddr != "" && !isPortZero(c.HTTPAddr) {
		errs = append(errs, fmt.Errorf("-http-addr and -grpc-addr are both %q: they need different ports", c.HTTPAddr))
	}
	intRange := func(flag string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("-%s %d: want %d to %d", flag, v, lo, hi))
		}
	}
	durRange := func(flag string, v, lo, hi time.Duration) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("-%s %s: want %s to %s", flag, v, lo, hi))
		}
	}
	intRange("pool-max", c.PoolMax, 1, 1000)
	durRange("conn-setup", c.ConnSetup, 0, 10*time.Second)
	durRange("query-time", c.QueryTime, 0, time.Second)
	durRange("row-time", c.RowTime, 0, 100*time.Millisecond)
	durRange("acquire-timeout", c.AcquireTimeout, time.Millisecond, 30*time.Second)
	durRange("cache-ttl", c.CacheTTL, 0, 24*time.Hour)
	intRange("cache-max-players", c.CacheMaxPlayers, playerShards, 10_000_000)
	durRange("shutdown-timeout", c.ShutdownTimeout, 0, 5*time.Minute)
	return errs
}

func checkAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, like 127.0.0.1:8080 (%v)", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q: want 0 to 65535", port)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if host == "" {
		host = "all interfaces"
	}
	return fmt.Errorf("%s is not a loopback address: use 127.0.0.1, [::1] or localhost, or pass -allow-remote", host)
}

func isPortZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}
