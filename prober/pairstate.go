package prober

import (
	"time"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// recordState is what a pair remembers for the landing page besides its
// statistics (stats.go): record ids and per-minute counts of the last hour.
// Updated once per recorded probe, read in O(1).
type recordState struct {
	lastID, lastFailureID uint64
	lastFailure           time.Time       // when the last failed probe ended
	minutes               [60]minuteCount // ring indexed by Unix minute mod 60
}

type minuteCount struct {
	minute            int64 // Unix minute the counts belong to
	probes, successes uint32
}

// note books a recorded result that ended at end and returns its id.
func (s *recordState) note(r *probe.Result, end time.Time) uint64 {
	s.lastID++
	id := s.lastID
	if !r.Success {
		s.lastFailureID, s.lastFailure = id, end
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
	return id
}

// window sums the probes and successes of the minutes since since.
func (s *recordState) window(since time.Time) (probes, successes int) {
	from := since.Unix() / 60
	for _, c := range s.minutes {
		if c.probes > 0 && c.minute >= from {
			probes += int(c.probes)
			successes += int(c.successes)
		}
	}
	return probes, successes
}

// RecordStats are the parts of PairStats the landing page needs besides the
// statistics: the last probe's error, the ids of stored records, and success
// counts over the last hour (by minute, so not bounded by the history).
type RecordStats struct {
	LastErr        string // the last probe's error, "" if it succeeded
	LastStatusCode int    // the last probe's HTTP status, 0 if none
	// LastID is the record id of the last probe, LastFailureID of the last
	// failed one (Manager.Record); 0 when none.
	LastID, LastFailureID uint64
	// LastFailure is when the last failed probe ended (zero when none); like
	// LastFailureID it outlives the history.
	LastFailure               time.Time
	HourProbes, HourSuccesses int
}

// recordStats returns p's RecordStats at now. m.mu must be held.
func (p *pair) recordStats(now time.Time) RecordStats {
	s := RecordStats{LastID: p.records.lastID, LastFailureID: p.records.lastFailureID, LastFailure: p.records.lastFailure}
	s.HourProbes, s.HourSuccesses = p.records.window(now.Add(-time.Hour))
	if n := len(p.hist.recent); n > 0 {
		last := p.hist.recent[n-1]
		s.LastErr, s.LastStatusCode = last.res.Err, last.res.StatusCode
	}
	return s
}

// Record returns a copy of the kept result id of (target, module, model),
// headers included; false when it is not (or no longer) kept. model is the
// pair's model label: it picks one of the pairs of a `models:` target, and is
// ignored for a target of one model.
func (m *Manager) Record(target, module, model string, id uint64) (Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pairs[pairKey{target: target, module: module, model: model}]
	if !ok {
		p, ok = m.pairs[pairKey{target: target, module: module}]
	}
	if !ok || id == 0 {
		return Record{}, false
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
