package results

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
)

// check reports what in a summary read from a file the tools cannot use:
// null entries in its maps and lists, and file references that leave the
// results folder. Every problem is named by its JSON path.
func (s *Summary) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	local := func(what, p string) {
		if p != "" && !filepath.IsLocal(p) {
			bad("%s is %q: file references must stay inside the results folder", what, p)
		}
	}
	for _, name := range sortedKeys(s.Scenarios) {
		sc := s.Scenarios[name]
		if sc == nil {
			bad("scenarios.%s is null; each scenario must be an object", name)
			continue
		}
		for _, rg := range sortedKeys(sc.Regimes) {
			if d := sc.Regimes[rg]; d != nil {
				local(fmt.Sprintf("scenarios.%s.regimes.%s.hlog", name, rg), d.HLog)
			}
		}
		for _, ep := range sortedKeys(sc.Endpoints) {
			if sc.Endpoints[ep] == nil {
				bad("scenarios.%s.endpoints.%s is null; each endpoint must be an object", name, ep)
			}
		}
	}
	for i, row := range s.Requests {
		if row == nil {
			bad("requests[%d] is null; each request row must be an object", i)
			continue
		}
		local(fmt.Sprintf("requests[%d].hlog", i), row.HLog)
	}
	for _, phase := range sortedKeys(s.ConnectionColdStart) {
		if s.ConnectionColdStart[phase] == nil {
			bad("connection_cold_start.%s is null; each phase must be an object", phase)
		}
	}
	for _, metric := range sortedKeys(s.Tracked) {
		byPhase := s.Tracked[metric]
		for _, phase := range sortedKeys(byPhase) {
			if byPhase[phase] == nil {
				bad("tracked.%s.%s is null; each phase must be an object", metric, phase)
			}
		}
	}
	for _, name := range sortedKeys(s.Series.Iterations) {
		local(fmt.Sprintf("series.iterations.%s.file", name), s.Series.Iterations[name].File)
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
