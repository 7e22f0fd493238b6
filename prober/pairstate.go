package prober

import (
	"time"
)

// pairState is what a (target, module) pair remembers beyond its bounded
// history: record ids, the last success, since when it fails, and per-minute
// counts of the last hour. It is updated once per recorded probe and read in
// O(1), so that the landing page never walks histories.
type pairState struct {
	lastID        uint64
	lastProbe     time.Time // end of the last recorded probe
	lastSuccess   time.Time // end of the last successful probe
	failingSince  time.Time // start of the first failure since the last success; zero when not failing
	lastReason    Reason
	lastFailureID uint64
	minutes       [60]minuteCount // ring indexed by Unix minute mod 60
}

type minuteCount struct {
	minute            int64 // Unix minute the counts belong to
	probes, successes uint32
}

// note books a recorded result that ended at end and gives it its id.
func (s *pairState) note(r *Result, end time.Time) {
	s.lastID++
	r.ID = s.lastID
	s.lastProbe = end
	s.lastReason = r.Reason
	if r.Success {
		s.lastSuccess = end
		s.failingSince = time.Time{}
	} else {
		s.lastFailureID = r.ID
		if s.failingSince.IsZero() {
			s.failingSince = r.Start
		}
	}
	m := end.Unix() / 60
	c := &s.minutes[m%60]
	if c.minute != m {
		*c = minuteCount{minute: m}
	}
	c.probes++
	if r.Success {
		c.successes++
	}
}

// window sums the probes and successes of the minutes that ended after since.
func (s *pairState) window(since time.Time) (probes, successes int) {
	from := since.Unix() / 60
	for _, c := range s.minutes {
		if c.probes > 0 && c.minute >= from {
			probes += int(c.probes)
			successes += int(c.successes)
		}
	}
	return probes, successes
}

// PairSummary is the state of one (target, module) pair for an overview, read
// without copying its history.
type PairSummary struct {
	Target, Module, Model string
	// Probes and Successes count the recent history (the last
	// --history.limit probes); HourProbes and
	// HourSuccesses the probes recorded in the last hour (by minute).
	Probes, Successes         int
	HourProbes, HourSuccesses int
	// LastProbe and LastSuccess are when the last (successful) probe ended,
	// FailingSince when the first failure after the last success started;
	// zero when unknown or not failing. They survive history eviction.
	LastProbe, LastSuccess, FailingSince time.Time
	LastSuccessful                       bool
	LastReason                           Reason
	LastErr                              string
	LastStatusCode                       int
	// LastID is the record id of the last probe, LastFailureID of the last
	// failed one (Manager.Record); 0 when none.
	LastID, LastFailureID uint64
}

// Summaries returns a summary of every pair, in configuration order.
func (m *Manager) Summaries() []PairSummary {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg == nil {
		return nil
	}
	now := m.now()
	out := make([]PairSummary, 0, len(m.pairs))
	for i := range m.cfg.Targets {
		tc := &m.cfg.Targets[i]
		for _, mod := range tc.Modules {
			p := m.pairs[pairKey{tc.Name, mod}]
			if p == nil {
				continue
			}
			st := &p.state
			s := PairSummary{Target: tc.Name, Module: mod, Model: p.tgt.model,
				LastProbe: st.lastProbe, LastSuccess: st.lastSuccess, FailingSince: st.failingSince,
				LastReason: st.lastReason, LastID: st.lastID, LastFailureID: st.lastFailureID}
			s.HourProbes, s.HourSuccesses = st.window(now.Add(-time.Hour))
			s.Probes, s.Successes = p.hist.counts()
			if n := len(p.hist.recent); n > 0 {
				last := p.hist.recent[n-1]
				s.LastSuccessful, s.LastErr, s.LastStatusCode = last.Success, last.Err, last.StatusCode
			}
			out = append(out, s)
		}
	}
	return out
}

// Record returns a copy of the kept result id of (target, module), headers
// included; false when it is not (or no longer) kept.
func (m *Manager) Record(target, module string, id uint64) (Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pairs[pairKey{target, module}]
	if !ok || id == 0 {
		return Result{}, false
	}
	return p.hist.find(id)
}

// TargetStatus returns the state of one target, histories included.
func (m *Manager) TargetStatus(name string) (TargetStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg == nil {
		return TargetStatus{}, false
	}
	tc, ok := m.cfg.Target(name)
	if !ok {
		return TargetStatus{}, false
	}
	return m.targetStatus(tc), true
}

// Successes returns copies of the kept successful results of (target, module)
// that started at or after since, newest first, without headers: what the
// regression ratios average. It does not copy the rest of the history.
func (m *Manager) Successes(target, module string, since time.Time) []Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pairs[pairKey{target, module}]
	if !ok {
		return nil
	}
	var out []Result
	p.hist.successesSince(since, func(r *Result) {
		c := *r
		c.packedHeaders = ""
		out = append(out, c)
	})
	return out
}
