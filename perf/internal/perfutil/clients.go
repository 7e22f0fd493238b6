package perfutil

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ParseLevels reads a comma-separated list of positive counts (streams,
// concurrency levels), naming flag in its error.
func ParseLevels(list, flag string) ([]int, error) {
	var levels []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad %s entry %q", flag, f)
		}
		levels = append(levels, n)
	}
	return levels, nil
}

// BuildProber builds this module's vllm_prober into dir and returns its path.
func BuildProber(dir string) (string, error) {
	bin := filepath.Join(dir, "vllm_prober")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/vllm-prober/vllm_prober/cmd/vllm_prober").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building vllm_prober: %w\n%s", err, out)
	}
	return bin, nil
}

// Tail returns the last lines of a command's output, for an error message.
func Tail(b []byte, lines int) string {
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}
