//go:build !linux

package e2e

import "os/exec"

// setDeathSignal has no equivalent outside Linux; children are still stopped
// and waited for in t.Cleanup.
func setDeathSignal(*exec.Cmd) {}
