package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"text/template"

	yaml "go.yaml.in/yaml/v2"
)

const (
	chartDir    = "helm/vllm-prober"
	releaseName = "rel"
	namespace   = "mon"
)

// object is one rendered Kubernetes object, normalised to JSON-like types
// (map[string]any, []any, string, float64, bool, nil).
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := dig(o, "metadata", "name").(string); return s }

// renderer renders the chart with value overrides into its objects.
type renderer struct {
	name   string
	render func(t *testing.T, overrides map[string]any) ([]object, error)
}

// renderers returns the built-in renderer and, when available, helm. With
// VLLM_PROBER_REQUIRE_HELM=1 a missing helm fails the test.
func renderers(t *testing.T) []renderer {
	t.Helper()
	rs := []renderer{{name: "builtin", render: renderBuiltin}}
	if h := helmPath(t); h != "" {
		rs = append(rs, renderer{name: "helm", render: func(t *testing.T, o map[string]any) ([]object, error) {
			return renderHelm(t, h, o)
		}})
	}
	return rs
}

// helmPath is $HELM or helm on PATH, "" if neither.
func helmPath(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("VLLM_PROBER_REQUIRE_HELM") == "1" {
			t.Fatalf("VLLM_PROBER_REQUIRE_HELM=1 but helm is not on PATH: %v", err)
		}
		t.Logf("helm is not on PATH: checking the chart with the built-in renderer only")
		return ""
	}
	return h
}

func renderHelm(t *testing.T, helm string, overrides map[string]any) ([]object, error) {
	t.Helper()
	args := []string{"template", releaseName, chartDir, "--namespace", namespace}
	if overrides != nil {
		b, err := yaml.Marshal(overrides)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "overrides.yaml")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return parseObjects(stdout.Bytes())
}

// parseObjects splits a multi-document YAML stream into its non-empty objects.
func parseObjects(b []byte) ([]object, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var objs []object
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parsing rendered YAML: %w", err)
		}
		if v == nil {
			continue
		}
		m, ok := normalize(v).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("rendered document is not a mapping: %v", v)
		}
		objs = append(objs, object(m))
	}
}

// normalize turns YAML-decoded values into JSON-like ones, as helm does: string
// map keys and float64 numbers.
func normalize(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = normalize(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = normalize(e)
		}
		return s
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	case float32:
		return float64(v)
	}
	return v
}

// dig walks nested maps by string key and lists by int index.
func dig(v any, keys ...any) any {
	for _, k := range keys {
		if o, ok := v.(object); ok {
			v = map[string]any(o)
		}
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

// chartFiles is helm's .Files: the chart's non-template files by path relative
// to the chart directory.
type chartFiles map[string][]byte

// Get returns a file's content, "" when missing (as helm does).
func (f chartFiles) Get(name string) string { return string(f[name]) }

// Glob returns the files matching pattern ('*' does not cross '/').
func (f chartFiles) Glob(pattern string) chartFiles {
	out := chartFiles{}
	for name, b := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = b
		}
	}
	return out
}

// renderBuiltin renders the chart's templates with text/template and the subset
// of helm's (sprig) functions the chart uses, mirroring `helm template`: values
// merged over values.yaml, missing keys render empty, partials (_*.tpl) and
// NOTES.txt are not output.
func renderBuiltin(t *testing.T, overrides map[string]any) ([]object, error) {
	t.Helper()
	meta := map[string]any{}
	readYAML(t, filepath.Join(chartDir, "Chart.yaml"), &meta)
	values := map[string]any{}
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &values)
	if overrides != nil {
		values = mergeValues(values, normalize(overrides).(map[string]any))
	}

	files := chartFiles{}
	templates := map[string]string{}
	err := filepath.WalkDir(chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(chartDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			templates[rel] = string(b)
		case rel != "Chart.yaml" && rel != "values.yaml" && rel != ".helmignore":
			files[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	root := template.New("gotpl").Option("missingkey=zero")
	root.Funcs(sprigSubset(root))
	names := make([]string, 0, len(templates))
	for name := range templates {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := root.New(path.Join("vllm-prober", name)).Parse(templates[name]); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
	}

	var out bytes.Buffer
	for _, name := range names {
		base := path.Base(name)
		if strings.HasPrefix(base, "_") || base == "NOTES.txt" {
			continue
		}
		full := path.Join("vllm-prober", name)
		data := map[string]any{
			"Values":  values,
			"Chart":   map[string]any{"Name": meta["name"], "Version": meta["version"], "AppVersion": meta["appVersion"]},
			"Release": map[string]any{"Name": releaseName, "Namespace": namespace, "Service": "Helm", "IsInstall": true},
			"Files":   files,
			"Template": map[string]any{
				"Name": full, "BasePath": "vllm-prober/templates",
			},
		}
		var b bytes.Buffer
		if err := root.ExecuteTemplate(&b, full, data); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", name, err)
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", full, strings.ReplaceAll(b.String(), "<no value>", ""))
	}
	return parseObjects(out.Bytes())
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var raw any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	n := normalize(raw)
	switch p := v.(type) {
	case *map[string]any:
		m, ok := n.(map[string]any)
		if !ok {
			t.Fatalf("%s: not a mapping", file)
		}
		*p = m
	case *any:
		*p = n
	default:
		t.Fatalf("readYAML: unsupported %T", v)
	}
}

// mergeValues merges src over dst like helm: maps merge recursively, anything
// else replaces.
func mergeValues(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(dm, sm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// sprigSubset implements the helm/sprig functions the chart uses, with sprig's
// argument order and semantics.
func sprigSubset(root *template.Template) template.FuncMap {
	indent := func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	}
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := root.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml": func(v any) string {
			b, err := yaml.Marshal(v)
			if err != nil {
				return ""
			}
			return strings.TrimSuffix(string(b), "\n")
		},
		"fromYaml": func(s string) map[string]any {
			var v any
			if err := yaml.Unmarshal([]byte(s), &v); err != nil {
				return map[string]any{"Error": err.Error()}
			}
			m, _ := normalize(v).(map[string]any)
			return m
		},
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote": func(vs ...any) string {
			out := make([]string, 0, len(vs))
			for _, v := range vs {
				if v != nil {
					out = append(out, fmt.Sprintf("%q", fmt.Sprint(v)))
				}
			}
			return strings.Join(out, " ")
		},
		"default": func(d any, given ...any) any {
			if len(given) == 0 || isEmpty(given[0]) {
				return d
			}
			return given[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"contains":   func(substr, s string) bool { return strings.Contains(s, substr) },
		"lower":      strings.ToLower,
		"base":       path.Base,
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
		"hasKey": func(m map[string]any, k string) bool { _, ok := m[k]; return ok },
		"list":   func(vs ...any) []any { return vs },
		"trim":   strings.TrimSpace,
		"regexReplaceAll": func(re, s, repl string) string {
			return regexp.MustCompile(re).ReplaceAllString(s, repl)
		},
		"fromYamlArray": func(s string) []any {
			var v []any
			if err := yaml.Unmarshal([]byte(s), &v); err != nil {
				return []any{err.Error()}
			}
			a, _ := normalize(v).([]any)
			return a
		},
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
		"int": func(v any) (int, error) {
			switch n := v.(type) {
			case int:
				return n, nil
			case int64:
				return int(n), nil
			case float64:
				return int(n), nil
			}
			return 0, fmt.Errorf("int: %T %v is not a number", v, v)
		},
		"until": func(n int) []int {
			out := make([]int, n)
			for i := range out {
				out[i] = i
			}
			return out
		},
		"toString": func(v any) string { return fmt.Sprint(v) },
	}
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case int:
		return v == 0
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}
