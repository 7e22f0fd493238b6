package e2e

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the child if the test binary dies
// without running its cleanups (a go test -timeout panic, SIGKILL). The normal
// path stops every child in t.Cleanup; this is only the safety net.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
