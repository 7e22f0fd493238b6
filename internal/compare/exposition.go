package compare

import (
	"encoding/binary"
	"hash/maphash"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// The Collector is an exposition.Partitioned: a target's joined and
// regression series are collected alone, and their version is that of
// the joins they read. The prober's and the collector's versions of the
// target cover the inputs those components own (a probe recorded, a
// scrape arrived): the Collector is not exposition.Independent, so the
// cache keys its part of a target by every component's version.

// versionSeed hashes a target's join versions; any fixed seed does.
var versionSeed = maphash.MakeSeed()

// ExpositionTargets implements exposition.Partitioned: the scraped targets
// and the baselined ones.
func (c *Collector) ExpositionTargets() []string {
	c.mu.RLock()
	st := c.state
	c.mu.RUnlock()
	if st == nil {
		return nil
	}
	names := make([]string, 0, len(st.scraped)+len(st.targets))
	for _, t := range st.scraped {
		names = append(names, t.name)
	}
	for _, t := range st.targets {
		if _, ok := st.scrapedIndex[t.name]; !ok {
			names = append(names, t.name)
		}
	}
	slices.Sort(names)
	return names
}

// ExpositionVersion implements exposition.Partitioned: the configuration's
// state and, for a baselined target, the joins a collection would read
// now. A pair's joins that time moved out of their slices are computed
// again here, so that a target whose probes and scrapes are quiet still
// renders the joins of now.
func (c *Collector) ExpositionVersion(target string) uint64 {
	c.mu.RLock()
	st, server := c.state, c.server
	c.mu.RUnlock()
	if st == nil {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(versionSeed)
	var b [8]byte
	word := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	word(st.gen)
	t := st.lookup(target)
	if t == nil || server == nil || c.probes == nil {
		return h.Sum64()
	}
	sj := c.serverJoinOf(st, server, t)
	word(sj.seq)
	if sj.ok {
		now := c.now()
		for i := range t.modules {
			word(c.pairJoinOf(st, t, i, sj, now).seq)
		}
	}
	return h.Sum64()
}

// CollectTarget implements exposition.Partitioned.
func (c *Collector) CollectTarget(name string, ch chan<- prometheus.Metric) {
	c.mu.RLock()
	st := c.state
	c.mu.RUnlock()
	server := c.server
	if st == nil || st.descs == nil || server == nil || c.probes == nil {
		return
	}
	if i, ok := st.scrapedIndex[name]; ok {
		c.collectJoined(ch, st, server, st.scraped[i])
	}
	if t := st.lookup(name); t != nil {
		c.collectTarget(ch, st, server, t, c.now())
	}
}

// CollectShared implements exposition.Partitioned: the baselines' points
// and the gateways' joins, which belong to no one target.
func (c *Collector) CollectShared(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	st := c.state
	c.mu.RUnlock()
	if st == nil || st.descs == nil {
		return
	}
	for _, m := range st.points {
		ch <- m
	}
	if c.gateways != nil {
		c.collectGateways(ch, st, c.now())
	}
}
