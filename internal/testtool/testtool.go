// Package testtool lets a test that needs an outside tool (chromium, helm,
// promtool) say that it was skipped because the tool is missing, where
// `make test` can show it: a skipped test is otherwise silent without -v.
//
// `make test` sets VLLM_PROBER_SKIP_LOG to a file; Skip appends one line to it
// per skipped test, and make prints the lines after go test's output.
package testtool

import (
	"fmt"
	"os"
	"testing"
)

// SkipLogEnv names the file Skip appends to.
const SkipLogEnv = "VLLM_PROBER_SKIP_LOG"

// Skip skips t because tool is missing; install says how to get it. The
// line goes to the file $VLLM_PROBER_SKIP_LOG names, when set.
func Skip(t testing.TB, tool, install string) {
	t.Helper()
	if path := os.Getenv(SkipLogEnv); path != "" {
		line := fmt.Sprintf("%s: %s is missing (%s)\n", t.Name(), tool, install)
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, err = f.WriteString(line)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Logf("cannot record the skip in %s: %v", path, err)
			}
		} else {
			t.Logf("cannot record the skip in %s: %v", path, err)
		}
	}
	t.Skipf("%s is missing (%s): skipped", tool, install)
}
