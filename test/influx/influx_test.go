package influx

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// script: a warm-up phase (ramping arrival rate, whole-scenario detector),
// a gameplay phase (constant arrival rate, one detector per endpoint) and an
// overloaded scenario that drops iterations; it records service_pool_*
// gauges and counters the way the scenario kit's pool probe does.
const script = `
import http from 'k6/http';
import { check, sleep } from 'k6';
import { Counter, Gauge } from 'k6/metrics';
import regime from 'k6/x/regime';

const pool = {
  size: new Gauge('service_pool_size'),
  inUse: new Gauge('service_pool_in_use'),
  waited: new Counter('service_pool_waited_acquires'),
  newConns: new Counter('service_pool_new_conns'),
  timeouts: new Counter('service_pool_acquire_timeouts'),
};

export const options = {
  scenarios: {
    ramp: {
      executor: 'ramping-arrival-rate', startRate: 50, timeUnit: '1s', preAllocatedVUs: 10, maxVUs: 40,
      stages: [{ target: 250, duration: '4s' }], tags: { phase: 'warmup' },
    },
    load: {
      executor: 'constant-arrival-rate', rate: 250, timeUnit: '1s', duration: '9s', startTime: '4s',
      preAllocatedVUs: 10, maxVUs: 40, tags: { phase: 'gameplay' },
    },
    overload: {
      executor: 'constant-arrival-rate', rate: 20, timeUnit: '1s', duration: '3s', startTime: '4s',
      preAllocatedVUs: 1, maxVUs: 1, exec: 'slow', tags: { phase: 'gameplay' },
    },
  },
  thresholds: { checks: ['rate==1'] },
};

// windows of 250 ms, so that the 9 s load phase reaches steady state (the
// service method needs 9 windows of a first level, 5 after a warm-up)
regime.configure(options, { scenarios: { load: { scope: 'endpoint', detector: { window_min_duration: '250ms' } } } });

let n = 0;
export default function () {
  const ep = __ITER % 2 === 0 ? 'item' : 'list';
  const res = http.get(__ENV.BASE_URL + '/' + ep, { tags: { endpoint: ep } });
  check(res, { 'status is 200': (r) => r.status === 200 });
  n++;
  pool.size.add(Math.min(20, 1 + Math.floor(n / 10)));
  pool.inUse.add(n % 5);
  pool.waited.add(n);
  pool.newConns.add(Math.min(20, 1 + Math.floor(n / 10)));
  pool.timeouts.add(0);
}

export function slow() {
  http.get(__ENV.BASE_URL + '/item', { tags: { endpoint: 'item' } });
  sleep(0.2);
}
`

// runBoth runs the script with k6's influxdb output and xk6-regime-influxdb
// writing to srv, tagged testid.
func runBoth(t *testing.T, srv *influxd, testid string, onStart func()) k6Result {
	t.Helper()
	app := newColdServer(t)
	return runK6(t, script, map[string]string{
		"BASE_URL":                          app.URL,
		"K6_REGIME_INFLUXDB_FLUSH_INTERVAL": "200ms",
		"K6_REGIME_INFLUXDB_RETRY_INTERVAL": "200ms",
		"K6_REGIME_INFLUXDB_STOP_TIMEOUT":   "5s",
	}, onStart,
		"--tag", "testid="+testid,
		"--out", "influxdb="+srv.url()+"/k6",
		"--out", "xk6-regime-influxdb="+srv.url()+"/k6",
	)
}

// dashboard is the part of the Grafana dashboard JSON the test reads.
type dashboard struct {
	Annotations struct {
		List []struct {
			Name  string `json:"name"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Query string `json:"query"`
		} `json:"targets"`
	} `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", "dashboards", "xk6-regime.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	return d
}

// substitute replaces Grafana's variables as Grafana would for InfluxQL: a
// multi-value variable inside a regex becomes (a|b).
func substitute(q string, vars map[string]string) string {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) }) // $__interval_ms before $__interval
	for _, k := range keys {
		q = strings.ReplaceAll(q, "${"+k+"}", vars[k])
		q = strings.ReplaceAll(q, "$"+k, vars[k])
	}
	return q
}

var (
	groupByRe  = regexp.MustCompile(`(?i)GROUP BY (.+?)(?: fill\(|$)`)
	leftoverRe = regexp.MustCompile(`\$[A-Za-z_{]`)
	measRe     = regexp.MustCompile(`FROM "([a-z_0-9]+)"`)
)

// groupTags lists the tag keys of a query's GROUP BY clause.
func groupTags(q string) []string {
	m := groupByRe.FindStringSubmatch(q)
	if m == nil {
		return nil
	}
	var tags []string
	for _, part := range strings.Split(m[1], ",") {
		part = strings.TrimSpace(part)
		if strings.HasPrefix(part, "time(") {
			continue
		}
		tags = append(tags, strings.Trim(part, `"`))
	}
	return tags
}

func tagValues(ss []series, key string) []string {
	set := map[string]bool{}
	for _, s := range ss {
		set[s.Tags[key]] = true
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func firstColumnValues(ss []series) []string {
	var out []string
	for _, s := range ss {
		for _, v := range s.Values {
			out = append(out, fmt.Sprint(v[len(v)-1]))
		}
	}
	return out
}

// TestDashboardQueries runs k6 with both outputs against a real InfluxDB
// 1.8, then every query of the dashboard (template variables, panels,
// annotations), and checks each returns series with the right tags.
//
// Not parallel: the detector must see a steady service, so the two k6 runs
// do not compete for the CPU.
func TestDashboardQueries(t *testing.T) {
	srv := startInfluxd(t)
	testid := fmt.Sprintf("influx-e2e-%d", time.Now().UnixNano())
	res := runBoth(t, srv, testid, nil)
	require.Equal(t, 0, res.ExitCode, "stderr:\n%s", res.Stderr)
	require.NotContains(t, res.Stderr, "xk6-regime-influxdb: dropped", "nothing may be dropped with InfluxDB up")

	d := loadDashboard(t)
	vars := map[string]string{
		"timeFilter": "time > now() - 1h", "__interval": "1s", "__interval_ms": "1000",
	}
	// template variables, in order (phase depends on testid)
	require.Len(t, d.Templating.List, 2)
	for _, v := range d.Templating.List {
		q := substitute(v.Query, vars)
		ss := srv.query(t, q)
		vals := firstColumnValues(ss)
		require.NotEmpty(t, vals, "variable %s: %s", v.Name, q)
		switch v.Name {
		case "testid":
			require.Contains(t, vals, testid)
			vars["testid"] = testid
		case "phase":
			require.ElementsMatch(t, []string{"gameplay", "warmup"}, vals)
			vars["phase"] = "(" + strings.Join(vals, "|") + ")"
		default:
			t.Fatalf("unknown template variable %s", v.Name)
		}
	}

	type check struct {
		name, query string
	}
	var checks []check
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			checks = append(checks, check{p.Title + "/" + tg.RefID, tg.Query})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Query != "" {
			checks = append(checks, check{"annotation " + a.Name, a.Query})
		}
	}
	require.GreaterOrEqual(t, len(checks), 15)

	for _, c := range checks {
		q := substitute(c.query, vars)
		require.NotRegexp(t, leftoverRe, q, "%s: unsubstituted variable", c.name)
		ss := srv.query(t, q)
		require.NotEmpty(t, ss, "%s returned no series:\n%s", c.name, q)
		rows := 0
		for _, s := range ss {
			rows += len(s.Values)
		}
		require.Positive(t, rows, "%s returned no rows", c.name)
		meas := ""
		if m := measRe.FindStringSubmatch(q); m != nil {
			meas = m[1]
		}
		for _, key := range groupTags(q) {
			for _, s := range ss {
				v, ok := s.Tags[key]
				require.True(t, ok, "%s: series without GROUP BY tag %q", c.name, key)
				if key == "endpoint" && strings.HasPrefix(meas, "regime_") {
					continue // empty = the whole-scenario detector
				}
				require.NotEmpty(t, v, "%s: series with an empty %q tag (%v)", c.name, key, s.Tags)
			}
		}
		t.Logf("%s: %d series, %d rows", c.name, len(ss), rows)

		// what each kind of query must show
		gt := groupTags(q)
		switch {
		case meas == "http_req_duration" && slices.Contains(gt, "phase") && slices.Contains(gt, "regime"):
			require.Subset(t, tagValues(ss, "phase"), []string{"gameplay", "warmup"}, c.name)
			require.Subset(t, tagValues(ss, "regime"), []string{"cold", "steady"}, c.name)
		case meas == "http_req_duration" && slices.Contains(gt, "endpoint"):
			require.Subset(t, tagValues(ss, "endpoint"), []string{"item", "list"}, c.name)
		case meas == "regime_summary" && slices.Contains(gt, "regime"):
			require.Equal(t, []string{"cold", "steady", "warmup"}, tagValues(ss, "regime"), c.name)
			require.Subset(t, tagValues(ss, "scenario"), []string{"load", "overload", "ramp"}, c.name)
		case meas == "regime_window":
			require.Subset(t, tagValues(ss, "endpoint"), []string{"", "item", "list"}, c.name)
		case meas == "http_reqs", meas == "http_req_failed":
			require.Equal(t, []string{"gameplay", "warmup"}, tagValues(ss, "phase"), c.name)
		case meas == "regime_transition":
			require.Contains(t, ss[0].Columns, "to", c.name)
		}
	}

	// the testid filter really filters
	require.Empty(t, srv.query(t, `SELECT count("value") FROM "http_req_duration" WHERE "testid" =~ /^other-run$/`))
	// what the regime output wrote: a steady transition of the load
	// scenario's endpoints, and no drops
	steady := srv.query(t, fmt.Sprintf(`SELECT "index" FROM "regime_transition" WHERE "testid" = '%s' AND "to" = 'steady' GROUP BY "scenario", "endpoint"`, testid))
	require.NotEmpty(t, steady, "no scenario reached steady state")
	out := srv.query(t, fmt.Sprintf(`SELECT last("points_dropped"), last("points_written") FROM "regime_output" WHERE "testid" = '%s'`, testid))
	require.Len(t, out, 1)
	require.EqualValues(t, 0, out[0].Values[0][1], "points_dropped")
	t.Logf("k6 ran %s; regime output wrote %v points", res.Elapsed.Round(time.Millisecond), out[0].Values[0][2])
}

// TestInfluxKilledMidRun: InfluxDB dies (SIGKILL) during the run. k6 still
// exits 0 (the script's thresholds pass), ends on time, and the output
// reports what it dropped on stderr.
func TestInfluxKilledMidRun(t *testing.T) {
	srv := startInfluxd(t)
	killed := make(chan time.Duration, 1)
	var start time.Time
	res := runBoth(t, srv, "influx-killed", func() {
		start = time.Now()
		go func() {
			// the server dies once both outputs have written gameplay-phase
			// data (polled, bounded): mid-run, whatever the machine's speed
			for time.Since(start) < 30*time.Second {
				if srv.count(`SELECT count("value") FROM "http_req_duration" WHERE "testid" = 'influx-killed' AND "phase" = 'gameplay'`) > 0 &&
					srv.count(`SELECT count("n") FROM "regime_window" WHERE "testid" = 'influx-killed' AND "scenario" = 'load'`) > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond) // polling an external process's progress
			}
			srv.kill()
			killed <- time.Since(start)
		}()
	})
	at := <-killed
	t.Logf("k6 ran %s with InfluxDB killed after %s", res.Elapsed.Round(time.Millisecond), at.Round(time.Millisecond))
	require.Less(t, at, res.Elapsed, "InfluxDB was killed while k6 ran")
	require.Equal(t, 0, res.ExitCode, "stderr:\n%s", res.Stderr)
	require.Contains(t, res.Stdout, "checks", "no end-of-test summary:\n%s", res.Stdout)
	// points not acknowledged: the output went on writing after the kill
	drop := regexp.MustCompile(`xk6-regime-influxdb: dropped [1-9]\d* points \(buffer full or late: \d+, not acknowledged by InfluxDB: [1-9]\d*\)[^\n]*`)
	require.Regexp(t, drop, res.Stderr)
	t.Logf("reported: %s", drop.FindString(res.Stderr))
	require.Contains(t, res.Stderr, "xk6-regime-influxdb: write to")
	// 13 s of scenarios plus start-up and the built-in output's own retries;
	// stopTimeout is 5 s
	require.Less(t, res.Elapsed, 30*time.Second)
}
