package prober

import (
	"slices"
	"time"
)

// DefaultHistoryLimit is how many recent results each (target, module) pair keeps
// for the landing page; as many recent failures are kept on top of them, so a
// failure stays visible long after successes pushed it out of the recent ring.
const DefaultHistoryLimit = 100

// history is a bounded record of a pair's results, in the manner of
// blackbox_exporter's ResultHistory. It is not safe for concurrent use (the
// Manager guards it).
type history struct {
	limit    int
	recent   []*Result // oldest first, at most limit
	failures []*Result // oldest first, at most limit
}

func (h *history) add(r *Result) {
	h.recent = appendBounded(h.recent, r, h.limit)
	if !r.Success {
		h.failures = appendBounded(h.failures, r, h.limit)
	}
}

func appendBounded(s []*Result, r *Result, limit int) []*Result {
	if limit < 1 {
		limit = 1
	}
	s = append(s, r)
	if len(s) > limit {
		s = slices.Delete(s, 0, len(s)-limit)
	}
	return s
}

// last returns the newest result, nil if none.
func (h *history) last() *Result {
	if len(h.recent) == 0 {
		return nil
	}
	return h.recent[len(h.recent)-1]
}

// list returns copies of the kept results, newest first, each once.
func (h *history) list() []Result {
	seen := make(map[*Result]bool, len(h.recent))
	all := make([]*Result, 0, len(h.recent)+len(h.failures))
	for _, s := range [][]*Result{h.recent, h.failures} {
		for _, r := range s {
			if !seen[r] {
				seen[r] = true
				all = append(all, r)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *Result) int { return b.Start.Compare(a.Start) })
	out := make([]Result, len(all))
	for i, r := range all {
		out[i] = *r
	}
	return out
}

// successesSince calls f for every successful result that started at or after since.
func (h *history) successesSince(since time.Time, f func(*Result)) {
	for i := len(h.recent) - 1; i >= 0; i-- {
		r := h.recent[i]
		if r.Start.Before(since) {
			return
		}
		if r.Success {
			f(r)
		}
	}
}
