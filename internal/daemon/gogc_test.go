package daemon

import (
	"runtime/debug"
	"testing"
)

// Without GOGC in the environment the daemon runs at DefaultGOGC; with it,
// the runtime's reading of the variable stands.
func TestSetGCDefault(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOGC" {
				return v
			}
			return ""
		}
	}
	if got := SetGCDefault(env("")); got != DefaultGOGC {
		t.Errorf("SetGCDefault without GOGC = %d, want %d", got, DefaultGOGC)
	}
	if got := debug.SetGCPercent(120); got != DefaultGOGC {
		t.Errorf("without GOGC the runtime's percentage is %d, want %d", got, DefaultGOGC)
	}
	// GOGC=120 was applied by the runtime at start (set by hand above).
	if got := SetGCDefault(env("120")); got != 120 {
		t.Errorf("SetGCDefault with GOGC=120 = %d, want 120", got)
	}
	if got := debug.SetGCPercent(100); got != 120 {
		t.Errorf("with GOGC set the runtime's percentage is %d, want it left at 120", got)
	}
}
