// Command k6bench measures the overhead of k6/x/regime: paired, alternating
// runs of a stock k6 of the same version and of this repository's k6, on an
// empty iteration and on one local HTTP request per iteration, and prints the
// median ratio of iteration rates (extension / stock) per variant. Machines
// are noisy, so only ratios measured in the same run are compared.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

type variant struct {
	name   string
	script string // for the extension binary
}

const stockEmpty = `export const options = { vus: %d, duration: '%s' };
export default function () {}
`
const stockHTTP = `import http from 'k6/http';
export const options = { vus: %d, duration: '%s' };
export default function () { http.get(__ENV.BASE_URL); }
`

var variants = []variant{
	{"auto-tagging", `import regime from 'k6/x/regime';
export const options = { vus: %d, duration: '%s' };
regime.configure(options, {});
export default function () { BODY }
`},
	{"wrap", `import regime from 'k6/x/regime';
export const options = { vus: %d, duration: '%s' };
regime.configure(options, { tagging: 'wrap' });
export default regime.wrap(function () { BODY });
`},
}

func main() {
	stock := flag.String("stock", "./k6-stock", "stock k6 binary (same k6 version, no extension)")
	ext := flag.String("k6", "./k6", "k6 binary with the extension")
	pairs := flag.Int("pairs", 5, "paired runs per workload and variant")
	dur := flag.Duration("duration", 4*time.Second, "duration of one run")
	vus := flag.Int("vus", 2, "VUs per run")
	flag.Parse()
	if *pairs < 1 || *pairs > 50 {
		fail(fmt.Errorf("-pairs must be in 1..50, got %d", *pairs))
	}
	if *dur < time.Second || *dur > time.Minute {
		fail(fmt.Errorf("-duration must be in 1s..1m, got %s", *dur))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	baseURL := "http://" + ln.Addr().String() + "/"

	dir, err := os.MkdirTemp("", "k6bench-")
	if err != nil {
		fail(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	d := dur.String()
	fmt.Printf("paired runs: %d per cell, %s each, %d VUs; ratio = extension rate / stock rate (median of pairs)\n\n", *pairs, d, *vus)
	fmt.Printf("%-14s %-14s %12s %12s %8s   %s\n", "workload", "variant", "stock it/s", "ext it/s", "ratio", "pair ratios")
	for _, wl := range []struct{ name, stock, body string }{
		{"empty", stockEmpty, ""},
		{"local-http", stockHTTP, "http.get(__ENV.BASE_URL);"},
	} {
		stockScript := write(dir, "stock-"+wl.name+".js", fmt.Sprintf(wl.stock, *vus, d))
		for _, v := range variants {
			body := strings.Replace(v.script, "BODY", wl.body, 1)
			if wl.body != "" {
				body = "import http from 'k6/http';\n" + body
			}
			extScript := write(dir, v.name+"-"+wl.name+".js", fmt.Sprintf(body, *vus, d))
			var ratios, sRates, eRates []float64
			for i := 0; i < *pairs; i++ {
				// alternate which binary goes first, so drift hits both alike
				var s, e float64
				if i%2 == 0 {
					s, e = rate(*stock, stockScript, dir, baseURL), rate(*ext, extScript, dir, baseURL)
				} else {
					e, s = rate(*ext, extScript, dir, baseURL), rate(*stock, stockScript, dir, baseURL)
				}
				sRates, eRates = append(sRates, s), append(eRates, e)
				ratios = append(ratios, e/s)
			}
			strs := make([]string, len(ratios))
			for i, r := range ratios {
				strs[i] = fmt.Sprintf("%.3f", r)
			}
			fmt.Printf("%-14s %-14s %12.0f %12.0f %7.3fx   %s\n", wl.name, v.name,
				median(sRates), median(eRates), median(ratios), strings.Join(strs, " "))
		}
	}
}

func write(dir, name, content string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		fail(err)
	}
	return p
}

// rate runs k6 once and returns its iterations per second.
func rate(bin, script, dir, baseURL string) float64 {
	export := filepath.Join(dir, "summary.json")
	_ = os.Remove(export)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--quiet", "--no-usage-report", "--summary-export", export, script)
	cmd.Env = append(os.Environ(), "BASE_URL="+baseURL, "K6_NO_USAGE_REPORT=true")
	if out, err := cmd.CombinedOutput(); err != nil {
		fail(fmt.Errorf("%s %s: %w\n%s", bin, script, err, out))
	}
	b, err := os.ReadFile(export)
	if err != nil {
		fail(err)
	}
	var s struct {
		Metrics map[string]map[string]float64 `json:"metrics"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		fail(err)
	}
	r, ok := s.Metrics["iterations"]["rate"]
	if !ok || r <= 0 {
		fail(errors.New("no iterations rate in the summary export of " + script))
	}
	return r
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "k6bench:", err)
	os.Exit(1)
}
