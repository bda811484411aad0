package influx

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// composeFile is the part of docker-compose.yml the checks read.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

var pinnedImage = regexp.MustCompile(`^[a-z0-9./_-]+:[A-Za-z0-9._-]+(@sha256:[0-9a-f]{64})?$`)

// requirePinned: a tag, and not latest.
func requirePinned(t *testing.T, where, image string) {
	t.Helper()
	require.Regexp(t, pinnedImage, image, "%s: image %q must be pinned to a tag", where, image)
	require.NotContains(t, strings.SplitN(image, "@", 2)[0], ":latest", "%s: image %q uses latest", where, image)
}

// TestComposeFile checks docker-compose.yml without Docker: every image and
// every Dockerfile base image pinned, every published port on 127.0.0.1,
// Grafana without anonymous access and with its password from the
// environment, the k6 run's results folder on the host.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(b, &c))
	for _, want := range []string{"influxdb", "grafana", "postgres", "demo-service", "k6"} {
		require.Contains(t, c.Services, want)
	}
	for name, s := range c.Services {
		require.NotEmpty(t, s.Image, "service %s has no image name", name)
		requirePinned(t, "service "+name, os.Expand(s.Image, func(string) string { return "" }))
		for _, p := range s.Ports {
			require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "service %s publishes %q beyond 127.0.0.1", name, p)
		}
		if s.Build != nil {
			df, err := os.ReadFile(filepath.Join(root, s.Build.Context, s.Build.Dockerfile))
			require.NoError(t, err, "service %s", name)
			sc := bufio.NewScanner(bytes.NewReader(df))
			froms := 0
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) >= 2 && strings.EqualFold(f[0], "FROM") {
					froms++
					requirePinned(t, s.Build.Dockerfile, f[1])
				}
			}
			require.Positive(t, froms, "%s has no FROM", s.Build.Dockerfile)
		}
	}
	g := c.Services["grafana"]
	require.Equal(t, "false", g.Environment["GF_AUTH_ANONYMOUS_ENABLED"])
	require.Equal(t, "${GRAFANA_ADMIN_PASSWORD:-change-me}", g.Environment["GF_SECURITY_ADMIN_PASSWORD"])
	// the k6 run's folder reaches the host, named by its testid
	k6 := c.Services["k6"]
	require.Equal(t, "${TESTID:-compose}", k6.Environment["TESTID"], "the script names its folder by __ENV.TESTID")
	require.Contains(t, k6.Volumes, "./results:"+k6.Environment["RESULTS_DIR"], "RESULTS_DIR is the host's ./results")
	// k6 starts when the service answers, not when its process starts
	require.Equal(t, "service_healthy", k6.DependsOn["demo-service"].Condition)
	require.NotNil(t, c.Services["demo-service"].Healthcheck, "demo-service needs a healthcheck for k6 to wait on")
	k6df, err := os.ReadFile(filepath.Join(root, "deploy", "k6.Dockerfile"))
	require.NoError(t, err)
	require.Contains(t, string(k6df), "--with github.com/xk6-regime/xk6-regime=.")
}

// TestComposeConfig runs `docker compose config` (the Docker CLI with the
// compose plugin, no engine needed) and checks the resolved file the same
// way: images pinned, ports on 127.0.0.1.
func TestComposeConfig(t *testing.T) {
	t.Parallel()
	// a missing CLI skips the test on a workstation; in CI (CI set), on
	// machines that have the Docker CLI, make deps builds the compose plugin
	skip := func(msg string) {
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; in CI (CI is set) a missing part fails the test")
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker CLI (make deps builds the compose plugin only for a docker CLI there is)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := exec.CommandContext(ctx, "docker", "compose", "version").Run(); err != nil {
		skip("the docker CLI has no compose plugin (`docker compose version` fails; make deps builds it)")
	}
	cmd := exec.CommandContext(ctx, "docker", "compose", "config", "-q")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "docker compose config -q:\n%s", out)

	cmd = exec.CommandContext(ctx, "docker", "compose", "config", "--format", "json")
	cmd.Dir = repoRoot(t)
	cmd.Stderr = os.Stderr
	js, err := cmd.Output()
	require.NoError(t, err)
	var resolved struct {
		Services map[string]struct {
			Image string `json:"image" yaml:"image"`
			Ports []struct {
				HostIP    string `json:"host_ip" yaml:"host_ip"`
				Published string `json:"published" yaml:"published"`
			} `json:"ports" yaml:"ports"`
		} `json:"services" yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(js, &resolved)) // JSON is YAML
	require.NotEmpty(t, resolved.Services, "docker compose config resolved no service")
	for name, s := range resolved.Services {
		requirePinned(t, "service "+name, s.Image)
		for _, p := range s.Ports {
			require.Equal(t, "127.0.0.1", p.HostIP, "service %s port %s", name, p.Published)
		}
	}
}
