// Package leakcheck fails a test binary when goroutines of the packages under
// test outlive their tests: every goroutine the project starts must stop with
// its owner.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests, then fails the binary when, after up to five seconds,
// a goroutine whose stack names one of the packages (for example
// "vllm_prober/collector.") is still alive. Use it as the body of TestMain.
func Main(m *testing.M, packages ...string) {
	code := m.Run()
	if code == 0 {
		if leaked := Wait(5*time.Second, packages...); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Wait polls until no goroutine other than the test runner's names one of the
// packages, or d has passed; it returns the stacks still alive then ("" when
// none).
func Wait(d time.Duration, packages ...string) string {
	deadline := time.Now().Add(d)
	for {
		leaked := Leaked(packages...)
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Leaked returns the stacks of the running goroutines that name one of the
// packages, leaving out the test runner's own.
func Leaked(packages ...string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "TestMain") || strings.Contains(g, "testing.tRunner") {
			continue
		}
		for _, p := range packages {
			if strings.Contains(g, p) {
				leaked = append(leaked, g)
				break
			}
		}
	}
	return leaked
}
