package packaging

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/xk6-regime/xk6-regime/internal/results"
	"github.com/xk6-regime/xk6-regime/test/testbin"
)

// crdFile is k6-operator's TestRun CRD, shared beside the repository (see
// its README there); it is read, never copied into the repository.
const crdFile = "../shared/schemas/k6-operator-testruns.crd.yaml"

// crdToJSONSchema writes, for each version of the CRD in path, its
// openAPIV3Schema as a JSON Schema named <kind>_<version>.json in dir, the
// way kubeconform's scripts/openapi2jsonschema.py does: every object with
// properties below the root gets additionalProperties: false (kubectl's
// strictness) unless it says otherwise, and format: int-or-string becomes
// oneOf string or integer.
func crdToJSONSchema(t *testing.T, path, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the TestRun CRD is expected at %s (the shared folder beside the repository)", path)
	var crd struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Names struct {
				Kind string `yaml:"kind"`
			} `yaml:"names"`
			Versions []struct {
				Name   string `yaml:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &crd))
	require.Equal(t, "CustomResourceDefinition", crd.Kind)
	var files []string
	for _, v := range crd.Spec.Versions {
		require.NotEmpty(t, v.Schema.OpenAPIV3Schema, "version %s has no openAPIV3Schema", v.Name)
		s := intOrString(denyAdditional(v.Schema.OpenAPIV3Schema, true))
		out, err := json.MarshalIndent(s, "", " ")
		require.NoError(t, err)
		name := filepath.Join(dir, strings.ToLower(crd.Spec.Names.Kind+"_"+v.Name)+".json")
		require.NoError(t, os.WriteFile(name, out, 0o600))
		files = append(files, name)
	}
	return files
}

func denyAdditional(v any, root bool) any {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["properties"]; ok && !root {
			if _, set := x["additionalProperties"]; !set {
				x["additionalProperties"] = false
			}
		}
		for k, e := range x {
			x[k] = denyAdditional(e, false)
		}
	case []any:
		for i, e := range x {
			x[i] = denyAdditional(e, false)
		}
	}
	return v
}

func intOrString(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x["format"] == "int-or-string" {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}
		for k, e := range x {
			x[k] = intOrString(e)
		}
	case []any:
		for i, e := range x {
			x[i] = intOrString(e)
		}
	}
	return v
}

// kubeconformResult is one line of kubeconform -output json -verbose.
type kubeconformResult struct {
	Resources []struct {
		Filename string `json:"filename"`
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Status   string `json:"status"`
		Msg      string `json:"msg"`
	} `json:"resources"`
}

// kubeconform validates files with the converted CRD only (the Kubernetes
// core schemas are not reachable from here: core kinds come back
// "statusSkipped", and are checked by TestK8sManifests instead).
func kubeconform(t *testing.T, exe, schemas string, files ...string) (map[string]string, string) {
	t.Helper()
	args := append([]string{"-strict", "-ignore-missing-schemas", "-output", "json", "-verbose",
		"-schema-location", filepath.Join(schemas, "{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json")}, files...)
	_, out := run(t, "", exe, args...)
	var res kubeconformResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	got := map[string]string{}
	for _, r := range res.Resources {
		got[r.Kind+"/"+r.Name] = r.Status
	}
	return got, out
}

// TestK8sTestRunSchema: deploy/k8s passes kubeconform (strict) against the
// TestRun CRD converted to JSON Schema here, and kubeconform rejects broken
// copies of the TestRun (a wrong type, a misspelt field, no script), so the
// pass is a real validation and not a skipped resource.
func TestK8sTestRunSchema(t *testing.T) {
	t.Parallel()
	exe := tool(t, "KUBECONFORM_BIN", "kubeconform")
	root := testbin.RepoRoot(t)
	schemas := t.TempDir()
	files := crdToJSONSchema(t, filepath.Join(root, crdFile), schemas)
	require.Len(t, files, 1)
	require.FileExists(t, filepath.Join(schemas, "testrun_v1alpha1.json"))

	manifests, err := filepath.Glob(filepath.Join(root, "deploy", "k8s", "*.yaml"))
	require.NoError(t, err)
	got, out := kubeconform(t, exe, schemas, manifests...)
	require.Equal(t, "statusValid", got["TestRun/xk6-regime-kit"], out)
	for kind, status := range got {
		if kind != "TestRun/xk6-regime-kit" {
			require.Equal(t, "statusSkipped", status, "%s (a core kind: no schema here)\n%s", kind, out)
		}
	}

	src, err := os.ReadFile(filepath.Join(root, "deploy", "k8s", "testrun.yaml"))
	require.NoError(t, err)
	for name, broken := range map[string]string{
		"parallelism as a string": strings.Replace(string(src), "parallelism: 4", `parallelism: "four"`, 1),
		"misspelt field":          strings.Replace(string(src), "parallelism: 4", "paralelism: 4", 1),
		"misspelt runner field":   strings.Replace(string(src), "    volumeMounts:", "    volumeMount:", 1),
		"no script": regexp.MustCompile(`(?s)  script:\n    configMap:\n      name: xk6-regime-kit\n      file: kit.tar\n`).
			ReplaceAllString(string(src), ""),
	} {
		require.NotEqual(t, string(src), broken, name)
		p := filepath.Join(t.TempDir(), "testrun.yaml")
		require.NoError(t, os.WriteFile(p, []byte(broken), 0o600))
		got, out := kubeconform(t, exe, schemas, p)
		require.Equal(t, "statusInvalid", got["TestRun/xk6-regime-kit"], "%s passed kubeconform:\n%s", name, out)
	}
}

// k8sDoc is the part of the manifests the cross-checks read.
type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec yaml.Node `yaml:"spec"`
}

type envVar struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

type volume struct {
	Name string `yaml:"name"`
	PVC  *struct {
		ClaimName string `yaml:"claimName"`
	} `yaml:"persistentVolumeClaim"`
}

type mount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

// TestK8sManifests cross-checks deploy/k8s beyond the schema: 4 runners on
// the kit's ConfigMap, the initializer and the runners on the same custom
// image, one results folder per pod on the claimed volume, the merge Job
// reading the same volume and test id as the runners, the image's user
// able to write (fsGroup = the Dockerfile's uid); and the ConfigMap that
// kit-configmap.sh writes holds the whole kit as one k6 archive under 1 MiB.
func TestK8sManifests(t *testing.T) {
	t.Parallel()
	root := testbin.RepoRoot(t)
	docs := map[string]k8sDoc{}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "k8s", "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var d k8sDoc
			err := dec.Decode(&d)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			docs[d.Kind] = d
		}
	}
	require.Contains(t, docs, "TestRun")
	require.Contains(t, docs, "PersistentVolumeClaim")
	require.Contains(t, docs, "Job")

	var tr struct {
		Parallelism int `yaml:"parallelism"`
		Script      struct {
			ConfigMap struct{ Name, File string } `yaml:"configMap"`
		} `yaml:"script"`
		Args        []string `yaml:"args"`
		Initializer struct {
			Image string `yaml:"image"`
		} `yaml:"initializer"`
		Runner struct {
			Image           string   `yaml:"image"`
			Env             []envVar `yaml:"env"`
			SecurityContext struct {
				FSGroup int `yaml:"fsGroup"`
			} `yaml:"securityContext"`
			Volumes      []volume `yaml:"volumes"`
			VolumeMounts []mount  `yaml:"volumeMounts"`
		} `yaml:"runner"`
	}
	trDoc := docs["TestRun"]
	require.NoError(t, trDoc.Spec.Decode(&tr))
	require.Equal(t, 4, tr.Parallelism)
	require.Equal(t, "xk6-regime-kit", tr.Script.ConfigMap.Name)
	require.Equal(t, "kit.tar", tr.Script.ConfigMap.File)
	require.Equal(t, tr.Runner.Image, tr.Initializer.Image, "the initializer inspects the script: it needs k6/x/regime too")
	require.Contains(t, tr.Args, "RESULTS_DIR=/results/$(POD_NAME)", "one results folder per pod")
	env := map[string]string{}
	for _, e := range tr.Runner.Env {
		env[e.Name] = e.Value
	}
	require.Contains(t, env, "POD_NAME")
	require.NotEmpty(t, env["TESTID"])
	require.Equal(t, []mount{{Name: "results", MountPath: "/results"}}, tr.Runner.VolumeMounts)
	require.Len(t, tr.Runner.Volumes, 1)
	require.Equal(t, docs["PersistentVolumeClaim"].Metadata.Name, tr.Runner.Volumes[0].PVC.ClaimName)

	df, err := os.ReadFile(filepath.Join(root, "deploy", "k6.Dockerfile"))
	require.NoError(t, err)
	require.Contains(t, string(df), "useradd --uid 12345 ")
	require.Equal(t, 12345, tr.Runner.SecurityContext.FSGroup)

	var job struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Image        string   `yaml:"image"`
					Env          []envVar `yaml:"env"`
					Command      []string `yaml:"command"`
					VolumeMounts []mount  `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []volume `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	}
	jobDoc := docs["Job"]
	require.NoError(t, jobDoc.Spec.Decode(&job))
	c := job.Template.Spec.Containers[0]
	require.Equal(t, tr.Runner.Image, c.Image)
	require.Equal(t, []envVar{{Name: "TESTID", Value: env["TESTID"]}}, c.Env, "the merge job merges the runners' test id")
	command := strings.Join(c.Command, " ")
	m := regexp.MustCompile(`k6 x regime merge (\S+) --out`).FindStringSubmatch(command)
	require.NotNil(t, m, command)
	// the glob finds the runners' folders, as saveResults names them, and
	// not those of another test id that starts or ends with this one
	glob := strings.ReplaceAll(m[1], `"$TESTID"`, env["TESTID"])
	started := time.Date(2026, 11, 27, 13, 0, 0, 0, time.UTC)
	for _, id := range []string{env["TESTID"], env["TESTID"] + "-b", "a-" + env["TESTID"]} {
		ok, err := path.Match(glob, "/results/runner-1-abcde/"+results.NewRunID(started, id))
		require.NoError(t, err)
		require.Equal(t, id == env["TESTID"], ok, "merge glob %s on a folder of test id %s", glob, id)
	}
	require.Equal(t, tr.Runner.VolumeMounts, c.VolumeMounts)
	require.Equal(t, docs["PersistentVolumeClaim"].Metadata.Name, job.Template.Spec.Volumes[0].PVC.ClaimName)

	// the generated ConfigMap
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "k8s", "kit-configmap.sh"))
	cmd.Env = append(os.Environ(), "K6="+testbin.K6(t), "PROFILE=short")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var cm struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		BinaryData map[string]string `yaml:"binaryData"`
	}
	require.NoError(t, yaml.Unmarshal(out, &cm))
	require.Equal(t, "ConfigMap", cm.Kind)
	require.Equal(t, tr.Script.ConfigMap.Name, cm.Metadata.Name)
	require.Less(t, len(out), 1<<20, "a ConfigMap holds at most 1 MiB")
	raw, err := base64.StdEncoding.DecodeString(cm.BinaryData[tr.Script.ConfigMap.File])
	require.NoError(t, err)
	var names []string
	var meta struct {
		Env map[string]string `json:"env"`
	}
	tr2 := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr2.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		if h.Name == "metadata.json" {
			require.NoError(t, json.NewDecoder(tr2).Decode(&meta))
		}
	}
	all := strings.Join(names, "\n")
	for _, want := range []string{"/scenarios/combined.js", "/scenarios/lib/phases.js", "/scenarios/proto/events.proto", "/thresholds/combined.js", "/thresholds/index.js"} {
		require.Contains(t, all, want, "the archive holds the whole kit")
	}
	require.Equal(t, map[string]string{"PROFILE": "short"}, meta.Env)
}
