// Package schedule is vllm_prober's one periodic loop, used for the probes of
// every (target, module) pair, the targets' health checks and the scrapes of
// their /metrics. It spreads loops over their interval by a stable phase of
// their name, so that a thousand loops started together do not all fire at
// once, and keeps it across restarts and reloads. It knows nothing of what
// it runs.
package schedule

import (
	"context"
	"hash/fnv"
	"time"
)

// Phase returns a stable point in [0, interval) for the name parts (hashed
// with FNV-1a, the parts separated by a NUL byte); 0 for interval <= 0.
func Phase(interval time.Duration, parts ...string) time.Duration {
	if interval <= 0 {
		return 0
	}
	h := fnv.New64a()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return time.Duration(h.Sum64() % uint64(interval))
}

// Run calls f until ctx is done: once at once when immediately is set, then
// after phase, then every interval. A call that overruns the interval makes
// the next one come as soon as it returns (ticks are dropped, never queued).
// Run returns when ctx is done, after f returned.
func Run(ctx context.Context, interval, phase time.Duration, immediately bool, f func(context.Context)) {
	if immediately {
		f(ctx)
	}
	timer := time.NewTimer(phase)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-timer.C:
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
