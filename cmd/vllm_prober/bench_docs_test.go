package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBenchOutputsAreDocumented: the output table of docs/baselines.md (§6)
// names the files bench writes, no more and no fewer: every file of a run
// matches a row, every row matches a file, and every chart the <metric> row
// names is written.
func TestBenchOutputsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/baselines.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## 6. Making a baseline: `vllm_prober bench`")
	if !ok {
		t.Fatal("docs/baselines.md has no bench section (## 6)")
	}
	section, _, _ = strings.Cut(section, "\n## ")

	const name = "docrun"
	row := regexp.MustCompile("(?m)^\\| `(<name>[^`]*)` \\|(.*)$")
	type docRow struct {
		file string
		re   *regexp.Regexp
		used bool
	}
	var rows []*docRow
	var metrics []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		pat := regexp.QuoteMeta(m[1])
		pat = strings.ReplaceAll(pat, "<name>", name)
		pat = strings.ReplaceAll(pat, "<level>", `(c[0-9]+|qps([0-9.]+|inf))`)
		pat = strings.ReplaceAll(pat, "<metric>", `[a-z-]+`)
		rows = append(rows, &docRow{file: m[1], re: regexp.MustCompile("^" + pat + "$")})
		if strings.Contains(m[1], "<metric>") {
			for _, c := range regexp.MustCompile("`([a-z]+(?:-[a-z]+)+|errors)`").FindAllStringSubmatch(m[2], -1) {
				metrics = append(metrics, c[1])
			}
		}
	}
	if len(rows) < 5 || len(metrics) < 3 {
		t.Fatalf("docs/baselines.md §6: %d file rows and %d chart names; the table was not found", len(rows), len(metrics))
	}

	url := startBenchSim(t, nil)
	dir := filepath.Join(t.TempDir(), "out")
	code, _, stderr := runBenchCLI(t, context.Background(), "bench", "--url", url, "--out", dir, "--requests", "2",
		"--concurrency", "1", "--request-rate", "inf", "--max-tokens", "3", "--name", name)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, e := range entries {
		written[e.Name()] = true
		found := false
		for _, r := range rows {
			if r.re.MatchString(e.Name()) {
				r.used, found = true, true
			}
		}
		if !found {
			t.Errorf("bench wrote %s, which docs/baselines.md §6 does not name", e.Name())
		}
	}
	for _, r := range rows {
		if !r.used {
			t.Errorf("docs/baselines.md §6 names %s, which bench did not write", r.file)
		}
	}
	for _, m := range metrics {
		if !written[name+"-"+m+".svg"] {
			t.Errorf("docs/baselines.md §6 names the chart %s, but bench wrote no %s-%s.svg", m, name, m)
		}
	}
}
