package prober

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// A record id names one kept probe result across the daemon: the exemplar
// label of its observations (ExemplarLabel) and what /probe/record?id=
// opens. It is "[<replica>-]<pair>-<n>": the replica's prefix (Options.
// RecordPrefix, e.g. "s3" for shard 3 of a sharded fleet, none for one
// replica), 12 hex digits of a hash of (target, module, model), and the
// pair's record number. It is at most ~45 characters, well within the
// 128 characters OpenMetrics allows an exemplar's labels.

// pairTag is 12 hex digits of an FNV-1a hash of the pair's key.
func pairTag(k pairKey) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(k.target + "\x00" + k.module + "\x00" + k.model))
	return fmt.Sprintf("%012x", h.Sum64()>>16)
}

// recordID is the record id of record n of p.
func (m *Manager) recordID(p *pair, n uint64) string {
	id := pairTag(p.key) + "-" + strconv.FormatUint(n, 10)
	if m.recordPrefix != "" {
		id = m.recordPrefix + "-" + id
	}
	return id
}

// ErrRecordElsewhere is returned by RecordByID for the record id of another
// replica; ErrRecordGone for one of this replica that is no longer kept.
var (
	ErrRecordElsewhere = errors.New("the record was made by another replica")
	ErrRecordGone      = errors.New("the record is no longer kept")
)

// RecordByID returns a copy of the kept result with record id rid (as the
// exemplars carry it) and its pair's target and module. The error says why
// not: a malformed id, ErrRecordElsewhere (the id names another replica's
// prefix) or ErrRecordGone (the pair or the record aged out).
func (m *Manager) RecordByID(rid string) (rec Record, target, module string, err error) {
	parts := strings.Split(rid, "-")
	if len(parts) == 2 {
		parts = append([]string{""}, parts...)
	}
	if len(parts) != 3 || len(parts[1]) != 12 {
		return Record{}, "", "", fmt.Errorf("%q is not a record id ([<replica>-]<12 hex digits>-<number>)", rid)
	}
	n, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || n == 0 {
		return Record{}, "", "", fmt.Errorf("%q is not a record id: %q is not a positive number", rid, parts[2])
	}
	if parts[0] != m.recordPrefix {
		return Record{}, "", "", fmt.Errorf("%w: replica %q, this one is %q", ErrRecordElsewhere, parts[0], m.recordPrefix)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, p := range m.pairs {
		if pairTag(k) != parts[1] {
			continue
		}
		if r, ok := p.hist.find(n); ok {
			return r, k.target, k.module, nil
		}
		return Record{}, k.target, k.module, ErrRecordGone
	}
	return Record{}, "", "", ErrRecordGone
}
