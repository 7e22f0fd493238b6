package perfutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// VLLMClientFiles are the files vLLM's benchmarks/benchmark_serving.py
// (v0.7.3) needs from vLLM's benchmarks/ directory.
var VLLMClientFiles = []string{"benchmark_serving.py", "backend_request_func.py", "benchmark_utils.py"}

// ExtractVLLMClient writes vLLM's client files at ref from the git directory
// gitDir (a clone or a bare mirror) into dir, a temporary directory: vLLM's
// code is never part of this repository.
func ExtractVLLMClient(gitDir, ref, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, f := range VLLMClientFiles {
		out, err := exec.Command("git", "--git-dir", gitDir, "show", ref+":benchmarks/"+f).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
			}
			return fmt.Errorf("extracting benchmarks/%s at %s from %s: %w", f, ref, gitDir, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), out, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
	}
	return nil
}
