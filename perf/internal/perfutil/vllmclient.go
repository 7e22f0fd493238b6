package perfutil

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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

// SideBySideFlags are the flags the side-by-side benchmarks (ttfterror,
// vsvllm) share: the requests, the simulator's timing, vLLM's client and
// the vllm_prober binary.
type SideBySideFlags struct {
	Tokens, InputLen                          *int
	TTFT, ITL                                 *time.Duration
	VLLMGit, VLLMRef, VLLMDir, Python, PyPath *string
	ProberBin                                 *string
}

// RegisterSideBySideFlags defines the shared flags on the command line.
func RegisterSideBySideFlags() *SideBySideFlags {
	return &SideBySideFlags{
		Tokens:    flag.Int("tokens", 100, "output tokens per request (ignore_eos)"),
		InputLen:  flag.Int("input-len", 64, "random prompt length in tokens"),
		TTFT:      flag.Duration("ttft", 50*time.Millisecond, "simulator time to first token"),
		ITL:       flag.Duration("itl", 20*time.Millisecond, "simulator inter-token latency (no batch slowdown)"),
		VLLMGit:   flag.String("vllm-git", "", "git directory of vLLM; the client's files at -vllm-ref are extracted to a temporary directory"),
		VLLMRef:   flag.String("vllm-ref", "v0.7.3", "tag or commit of vLLM whose benchmarks/ client runs"),
		VLLMDir:   flag.String("vllm-dir", "", "directory already holding "+strings.Join(VLLMClientFiles, ", ")+" (instead of -vllm-git)"),
		Python:    flag.String("python", "/usr/bin/python3", "Python interpreter with aiohttp, numpy, tqdm, pillow and pandas"),
		PyPath:    flag.String("pythonpath", "", "PYTHONPATH for vLLM's client (e.g. offline stand-ins for transformers, datasets, huggingface_hub)"),
		ProberBin: flag.String("prober", "", "vllm_prober binary (default: built from this module)"),
	}
}

// SideBySide is what a side-by-side benchmark's runs read: the requests,
// the simulator's timing, vLLM's client and the work directory.
type SideBySide struct {
	Tokens, InputLen int
	TTFT, ITL        time.Duration
	Python, PyPath   string
	*Workdir
}

// Open sets up the work directory (NewWorkdir with the flags' prober and
// vLLM client) and returns what the runs read. Close the Workdir after.
func (f *SideBySideFlags) Open(prefix string, writable bool) (SideBySide, error) {
	w, err := NewWorkdir(prefix, *f.ProberBin, *f.VLLMGit, *f.VLLMRef, *f.VLLMDir, writable)
	if err != nil {
		return SideBySide{}, err
	}
	return SideBySide{Tokens: *f.Tokens, InputLen: *f.InputLen, TTFT: *f.TTFT, ITL: *f.ITL,
		Python: *f.Python, PyPath: *f.PyPath, Workdir: w}, nil
}
