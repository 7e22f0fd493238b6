// Package perfutil holds what the figure programs under perf/ share: the
// machine description, process statistics from /proc, percentiles and medians.
package perfutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Machine describes the machine for the report: date, nproc, the first lines of
// lscpu, the Go version and the load average.
func Machine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "nproc: %d, GOMAXPROCS: %d, %s %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if out, err := exec.Command("lscpu").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "Model name:") || strings.HasPrefix(l, "CPU(s):") {
				fmt.Fprintf(&b, "%s\n", strings.Join(strings.Fields(l), " "))
			}
		}
	}
	fmt.Fprintf(&b, "load average: %s\n", LoadAvg())
	return b.String()
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Load1 is the one-minute load average, -1 when unknown.
func Load1() float64 {
	v, err := strconv.ParseFloat(strings.Fields(LoadAvg() + " x")[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// ProcStat is what /proc says about one process.
type ProcStat struct {
	CPU time.Duration // user + system
	RSS int64         // bytes
}

// ReadProc reads the CPU time and resident set size of pid (0: this process).
func ReadProc(pid int) (ProcStat, error) {
	p := "self"
	if pid > 0 {
		p = strconv.Itoa(pid)
	}
	stat, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return ProcStat{}, fmt.Errorf("reading /proc/%s/stat: %w", p, err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return ProcStat{}, fmt.Errorf("parsing /proc/%s/stat: no command name", p)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 22 {
		return ProcStat{}, fmt.Errorf("parsing /proc/%s/stat: %d fields", p, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return ProcStat{}, fmt.Errorf("parsing /proc/%s/stat: bad utime, stime or rss", p)
	}
	const clkTck = 100 // USER_HZ on Linux
	return ProcStat{
		CPU: time.Duration(utime+stime) * time.Second / clkTck,
		RSS: rss * int64(os.Getpagesize()),
	}, nil
}

// Percentile is the nearest-rank p-th percentile (0-100) of sorted, NaN-free
// values; 0 when empty.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// Median of values (which it sorts).
func Median(values []float64) float64 {
	slices.Sort(values)
	n := len(values)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return values[n/2]
	default:
		return (values[n/2-1] + values[n/2]) / 2
	}
}
