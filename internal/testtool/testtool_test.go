package testtool

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSkipIsRecorded: a test skipped for a missing tool is skipped and named
// in the file make test prints.
func TestSkipIsRecorded(t *testing.T) {
	log := filepath.Join(t.TempDir(), "skipped.txt")
	t.Setenv(SkipLogEnv, log)
	var skipped bool
	t.Run("needs-x", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Skip(t, "x-tool", "apt-get install x")
	})
	if !skipped {
		t.Error("the subtest was not skipped")
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "TestSkipIsRecorded/needs-x: x-tool is missing (apt-get install x)\n"; string(data) != want {
		t.Errorf("skip log %q, want %q", data, want)
	}
}
