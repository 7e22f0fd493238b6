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

// Workdir is the set-up the side-by-side benchmarks (ttfterror, vsvllm)
// share: a temporary directory, the vllm_prober binary they run and, when
// given, a directory holding vLLM's client.
type Workdir struct {
	Tmp       string // removed by Close
	ProberBin string
	VLLMDir   string // "" when vLLM's client is not available
}

// NewWorkdir creates a Workdir in a new temporary directory named by prefix.
// proberBin "" builds vllm_prober there. vLLM's client is extracted from
// vllmGit at vllmRef, or taken from vllmDir: as it is, or, with writable
// (the benchmark writes files next to it), copied into the temporary
// directory.
func NewWorkdir(prefix, proberBin, vllmGit, vllmRef, vllmDir string, writable bool) (*Workdir, error) {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory: %w", err)
	}
	w := &Workdir{Tmp: tmp, ProberBin: proberBin}
	if err := w.setUp(vllmGit, vllmRef, vllmDir, writable); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *Workdir) setUp(vllmGit, vllmRef, vllmDir string, writable bool) error {
	if w.ProberBin == "" {
		bin, err := BuildProber(w.Tmp)
		if err != nil {
			return err
		}
		w.ProberBin = bin
	}
	switch {
	case vllmDir != "" && !writable:
		w.VLLMDir = vllmDir
	case vllmDir != "":
		w.VLLMDir = filepath.Join(w.Tmp, "vllm-benchmarks")
		if err := os.MkdirAll(w.VLLMDir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", w.VLLMDir, err)
		}
		for _, f := range VLLMClientFiles {
			data, err := os.ReadFile(filepath.Join(vllmDir, f))
			if err != nil {
				return fmt.Errorf("reading vLLM's client: %w", err)
			}
			if err := os.WriteFile(filepath.Join(w.VLLMDir, f), data, 0o644); err != nil {
				return fmt.Errorf("copying vLLM's client: %w", err)
			}
		}
	case vllmGit != "":
		w.VLLMDir = filepath.Join(w.Tmp, "vllm-benchmarks")
		return ExtractVLLMClient(vllmGit, vllmRef, w.VLLMDir)
	}
	return nil
}

// Close removes the temporary directory.
func (w *Workdir) Close() { _ = os.RemoveAll(w.Tmp) }
