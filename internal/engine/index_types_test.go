package engine

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// TestIndexTypesMatchReport: index.d.ts declares, for every interface of
// what summary() returns, exactly the JSON fields of the Go type it is
// marshalled from, each optional (name?:) exactly when the Go field is
// omitted when empty. The report is built once in Go (report.go); this
// keeps its hand-written TypeScript from drifting.
func TestIndexTypesMatchReport(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../index.d.ts")
	require.NoError(t, err)
	for iface, v := range map[string]any{
		"Summary":         RunReport{},
		"ScenarioSummary": ScenarioReport{},
		"Distribution":    RegimeDist{},
		"Detection":       Detection{},
		"RequestRow":      requestReport{},
		"Point":           results.Point{},
		"Settled":         results.Settled{},
		"ProfileUse":      results.ProfileUse{},
		"ProfileCheck":    results.ProfileCheck{},
	} {
		want := jsonFields(reflect.TypeOf(v))
		got := tsFields(t, string(src), iface)
		require.Equal(t, want, got, "index.d.ts interface %s against the Go type %T (name, or name? when omitted if empty)", iface, v)
	}
}

// jsonFields lists the JSON names of t's fields (embedded structs'
// included), with "?" after those marked omitempty, sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() && !f.Anonymous || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "omitempty") {
			name += "?"
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

var (
	tsComment = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	tsField   = regexp.MustCompile(`(?m)(?:^|[;{])\s*([a-z_0-9]+\??)\s*:`)
)

// tsFields lists the field names (with "?" when optional) of the top-level
// members of interface name in src, sorted.
func tsFields(t *testing.T, src, name string) []string {
	t.Helper()
	src = tsComment.ReplaceAllString(src, "")
	i := strings.Index(src, "export interface "+name+" ")
	require.GreaterOrEqual(t, i, 0, "interface %s not found", name)
	open := strings.Index(src[i:], "{") + i
	depth, end := 0, -1
	var body strings.Builder
	for j := open; j < len(src) && end < 0; j++ {
		switch src[j] {
		case '{':
			depth++
			if depth == 1 {
				continue
			}
		case '}':
			depth--
			if depth == 0 {
				end = j
				continue
			}
		}
		if depth == 1 {
			body.WriteByte(src[j])
		} else if depth > 1 && src[j] == '{' {
			body.WriteString("{")
		}
	}
	var out []string
	for _, m := range tsField.FindAllStringSubmatch(";"+body.String(), -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}
