package results

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment is what the load generator was: versions, CPUs, CPU frequency
// governor, its cgroup CPU limit and how much it was throttled and busy over
// the run. When the generator itself was throttled or saturated, its
// latencies include its own queuing: Warnings say so.
type Environment struct {
	K6Version        string `json:"k6_version"`
	ExtensionVersion string `json:"extension_version"`
	GoVersion        string `json:"go_version"`
	OS               string `json:"os"`
	Arch             string `json:"arch"`
	Hostname         string `json:"hostname,omitempty"`
	CPUs             int    `json:"cpus"`
	GOMAXPROCS       int    `json:"gomaxprocs"`
	Governor         string `json:"cpu_governor"`
	// Cgroup is "v2", "v1" or "none"; CPULimit the raw limit ("max" when none)
	// and CPULimitCores the limit in cores (nil when unlimited).
	Cgroup        string   `json:"cgroup"`
	CPULimit      string   `json:"cpu_limit"`
	CPULimitCores *float64 `json:"cpu_limit_cores"`
	// Throttling over the run (deltas between the probe's start and end).
	ThrottledPeriods int64   `json:"throttled_periods"`
	Periods          int64   `json:"periods"`
	ThrottledMs      float64 `json:"throttled_ms"`
	// Process CPU time over wall time, and that over the usable cores.
	ProcessCPUSeconds float64  `json:"process_cpu_s"`
	WallSeconds       float64  `json:"wall_s"`
	CPUUtilization    float64  `json:"cpu_utilization"`
	Warnings          []string `json:"warnings"`
}

// SaturationThreshold is the share of the usable cores above which the load
// generator counts as saturated.
const SaturationThreshold = 0.9

// Probe measures the environment between its start and Finish.
//
// A Probe is not safe for concurrent use.
type Probe struct {
	// ReadFile, CPUTime and Now are the probe's view of the machine; tests
	// replace them.
	ReadFile func(name string) ([]byte, error)
	CPUTime  func() time.Duration
	Now      func() time.Time
	NumCPU   int

	started bool
	t0      time.Time
	cpu0    time.Duration
	stat0   cgroupStat
	statOK0 bool
}

type cgroupStat struct {
	periods, throttled int64
	throttledUs        float64
}

// NewProbe returns a probe of this process and machine.
func NewProbe() *Probe {
	return &Probe{ReadFile: os.ReadFile, CPUTime: processCPUTime, Now: time.Now, NumCPU: runtime.NumCPU()}
}

// Start takes the first snapshot (test start).
func (p *Probe) Start() {
	p.started = true
	p.t0 = p.Now()
	p.cpu0 = p.CPUTime()
	_, _, _, p.stat0, p.statOK0 = p.cgroup()
}

// Started says whether Start ran.
func (p *Probe) Started() bool { return p.started }

// Finish takes the second snapshot and describes the environment.
func (p *Probe) Finish() Environment {
	if !p.started {
		p.Start()
	}
	e := Environment{
		K6Version: "unknown", ExtensionVersion: "unknown", GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: p.NumCPU, GOMAXPROCS: runtime.GOMAXPROCS(0),
		Governor: "unknown", Cgroup: "none", CPULimit: "max", Warnings: []string{},
	}
	e.K6Version, e.ExtensionVersion = buildVersions()
	if h, err := os.Hostname(); err == nil {
		e.Hostname = h
	}
	if b, err := p.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"); err == nil {
		e.Governor = strings.TrimSpace(string(b))
	}
	ver, raw, cores, stat1, ok := p.cgroup()
	e.Cgroup, e.CPULimit, e.CPULimitCores = ver, raw, cores
	if ok && p.statOK0 {
		e.Periods = stat1.periods - p.stat0.periods
		e.ThrottledPeriods = stat1.throttled - p.stat0.throttled
		e.ThrottledMs = (stat1.throttledUs - p.stat0.throttledUs) / 1000
	}
	wall := p.Now().Sub(p.t0)
	cpu := p.CPUTime() - p.cpu0
	e.WallSeconds, e.ProcessCPUSeconds = wall.Seconds(), cpu.Seconds()
	usable := float64(p.NumCPU)
	if cores != nil && *cores < usable {
		usable = *cores
	}
	if wall > 0 && usable > 0 {
		e.CPUUtilization = cpu.Seconds() / wall.Seconds() / usable
	}
	if e.ThrottledPeriods > 0 {
		e.Warnings = append(e.Warnings, fmt.Sprintf("the load generator was CPU-throttled by its cgroup (limit %s): "+
			"%d periods, %.0f ms throttled during the run; its latency figures are suspect", e.CPULimit, e.ThrottledPeriods, e.ThrottledMs))
	}
	if e.CPUUtilization > SaturationThreshold {
		e.Warnings = append(e.Warnings, fmt.Sprintf("the load generator was saturated: k6 used %.0f%% of its %.1f usable cores "+
			"(CPU time %.1f s over %.1f s); its latency figures are suspect", 100*e.CPUUtilization, usable, e.ProcessCPUSeconds, e.WallSeconds))
	}
	if e.Governor != "unknown" && e.Governor != "performance" {
		e.Warnings = append(e.Warnings, fmt.Sprintf("CPU frequency governor is %q, not \"performance\": frequency scaling "+
			"can look like warm-up", e.Governor))
	}
	return e
}

// cgroup reads the CPU limit and throttling counters of this process's
// cgroup: v2 (cpu.max, cpu.stat) or else v1 (cpu.cfs_quota_us, cpu.stat).
func (p *Probe) cgroup() (ver, raw string, cores *float64, st cgroupStat, ok bool) {
	v2path, v1path := p.cgroupPaths()
	for _, dir := range []string{path.Join("/sys/fs/cgroup", v2path), "/sys/fs/cgroup"} {
		b, err := p.ReadFile(path.Join(dir, "cpu.max"))
		if err != nil {
			continue
		}
		raw = strings.TrimSpace(string(b))
		f := strings.Fields(raw)
		if len(f) == 2 && f[0] != "max" {
			q, e1 := strconv.ParseFloat(f[0], 64)
			per, e2 := strconv.ParseFloat(f[1], 64)
			if e1 == nil && e2 == nil && per > 0 {
				c := q / per
				cores = &c
			}
		}
		if sb, err := p.ReadFile(path.Join(dir, "cpu.stat")); err == nil {
			kv := parseKV(sb)
			st = cgroupStat{periods: int64(kv["nr_periods"]), throttled: int64(kv["nr_throttled"]), throttledUs: kv["throttled_usec"]}
			ok = true
		}
		return "v2", raw, cores, st, ok
	}
	for _, base := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"} {
		for _, dir := range []string{path.Join(base, v1path), base} {
			if raw, cores, st, ok, found := p.cgroupV1(dir); found {
				return "v1", raw, cores, st, ok
			}
		}
	}
	return "none", "max", nil, st, false
}

// cgroupPaths reads this process's cgroup paths from /proc/self/cgroup:
// the unified (v2) hierarchy's, and the v1 cpu controller's.
func (p *Probe) cgroupPaths() (v2path, v1path string) {
	b, err := p.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				v1path = parts[2]
			}
		}
	}
	return v2path, v1path
}

// cgroupV1 reads the CPU quota and throttling of a cgroup v1 cpu folder
// (found: false when it has no cpu.cfs_quota_us).
func (p *Probe) cgroupV1(dir string) (raw string, cores *float64, st cgroupStat, ok, found bool) {
	qb, err := p.ReadFile(path.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return "", nil, st, false, false
	}
	pb, _ := p.ReadFile(path.Join(dir, "cpu.cfs_period_us"))
	q, _ := strconv.ParseFloat(strings.TrimSpace(string(qb)), 64)
	per, _ := strconv.ParseFloat(strings.TrimSpace(string(pb)), 64)
	raw = "max"
	if q > 0 && per > 0 {
		raw = fmt.Sprintf("%.0f %.0f", q, per)
		c := q / per
		cores = &c
	}
	if sb, err := p.ReadFile(path.Join(dir, "cpu.stat")); err == nil {
		kv := parseKV(sb)
		st = cgroupStat{periods: int64(kv["nr_periods"]), throttled: int64(kv["nr_throttled"]), throttledUs: kv["throttled_time"] / 1000}
		ok = true
	}
	return raw, cores, st, ok, true
}

func parseKV(b []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}

func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// buildVersions reads the k6 and xk6-regime versions from the binary's build
// information.
func buildVersions() (k6, ext string) {
	k6, ext = "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return k6, ext
	}
	const extPath = "github.com/xk6-regime/xk6-regime"
	rev := ""
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			rev = s.Value[:12]
		}
	}
	if bi.Main.Path == extPath {
		ext = bi.Main.Version
		if rev != "" {
			ext += " " + rev
		}
	}
	for _, d := range bi.Deps {
		switch {
		case d.Path == "go.k6.io/k6/v2" || d.Path == "go.k6.io/k6":
			k6 = d.Version
		case d.Path == extPath:
			ext = d.Version
		}
	}
	return k6, ext
}
