package prober

import (
	"sort"
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// ProbesSince returns how many of the kept probes started at or after since,
// and how many of them succeeded: the denominator and numerator of the
// success ratio a gate judges over a window. Like Means it neither locks nor
// allocates.
func (s PairStats) ProbesSince(since time.Time) (probes, successes int) {
	w := &s.window
	at := since.UnixNano()
	i := sort.Search(len(w.entries), func(i int) bool { return w.entries[i].start >= at })
	return len(w.entries) - i, w.since(at).n
}

// MeansOf returns the means of the successful results among rs, with the
// definitions the daemon's windows use (Means): a one-shot check and the
// daemon's gate judge probes with the same arithmetic.
func MeansOf(rs []*probe.Result) Means {
	var w statWindow
	for _, r := range rs {
		w.add(r, len(rs))
	}
	return w.means(0)
}
