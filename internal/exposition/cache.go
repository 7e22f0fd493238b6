// Package exposition serves the daemon's /metrics from encoded bytes kept
// per target, re-encoding a target's series only when they changed.
//
// Most of a fleet's exposition belongs to its targets: at 1,000 targets,
// 11.6 MB of text of which the daemon's own series are a few kilobytes.
// promhttp gathers, sorts, checks and encodes every series at every
// scrape; here the components that own targets' series (the prober, the
// collector, the joins) implement Partitioned, and a render collects and
// encodes only the targets whose version moved since the last render in
// that format, then writes each family's header once and the cached
// bodies of every target after it.
package exposition

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Partitioned is a collector whose series belong to targets, each of which
// can be collected alone. Collect still sends every series (the full
// registry, the slow path of /metrics and the tests gather it).
type Partitioned interface {
	prometheus.Collector
	// ExpositionTargets returns every target that may have series now.
	ExpositionTargets() []string
	// ExpositionVersion returns a value that changes whenever a series of
	// target would render differently from the last time it returned
	// that value. A change of an input another Partitioned component
	// owns need not move it: the cache keys a target by the versions of
	// every component together.
	ExpositionVersion(target string) uint64
	// CollectTarget sends the series of target alone.
	CollectTarget(target string, ch chan<- prometheus.Metric)
	// CollectShared sends the series that belong to no target (e.g. a
	// baseline's points); they are collected at every render.
	CollectShared(ch chan<- prometheus.Metric)
}

// Format is an exposition format the cache encodes.
type Format int

// The formats served from the cache; protobuf is served by promhttp.
const (
	Text Format = iota
	OpenMetrics
	numFormats
)

// Cache holds the encoded series of every target of its Partitioned
// components. It is safe for concurrent use.
type Cache struct {
	labels prometheus.Labels // added to every series (the vantage)
	seed   maphash.Seed

	mu      sync.Mutex
	sources []Partitioned
	targets map[string]*entry
	shared  *prometheus.Registry
	// encodings counts the targets encoded since New (Encodings); jobs
	// numbers the encodings as they are decided (encoded.seq).
	encodings, jobs uint64
	// served is when a render last asked for each format: Run keeps the
	// formats asked for within keepWarm encoded ahead.
	served [numFormats]time.Time

	// heads holds each family's comment lines once per format: every
	// target's chunk of a family shares them.
	heads [numFormats]headTable
}

// keepWarm is how long after a render in a format Run keeps encoding that
// format ahead: a few scrape intervals.
const keepWarm = 5 * time.Minute

// entry is one target's registry (its series from every source) and its
// encoded families per format.
type entry struct {
	reg     *prometheus.Registry
	encoded [numFormats]*encoded
}

// encoded is a target's families in one format, as of version.
type encoded struct {
	version uint64
	seq     uint64  // the job's that encoded it: a later job read a later state
	fams    []chunk // sorted by name
	err     error   // the gathering's, reported at every render until the target changes
}

// chunk is one family of one target: head holds its comment lines (# HELP,
// # TYPE, # UNIT), body its samples.
type chunk struct {
	name       string
	head, body []byte
}

// NewCache returns a Cache adding labels to every series.
func NewCache(labels prometheus.Labels) *Cache {
	return &Cache{labels: labels, seed: maphash.MakeSeed(), targets: map[string]*entry{}, shared: prometheus.NewRegistry()}
}

// add makes p one of the cache's sources.
func (c *Cache) add(p Partitioned) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.wrap(c.shared).Register(sharedOf{p}); err != nil {
		return fmt.Errorf("registering the shared series: %w", err)
	}
	c.sources = append(c.sources, p)
	clear(c.targets) // every target's registry gains the source
	return nil
}

// wrap returns r adding the cache's labels, r itself when there are none:
// a wrapping registry makes a new Desc for every series it gathers.
func (c *Cache) wrap(r prometheus.Registerer) prometheus.Registerer {
	if len(c.labels) == 0 {
		return r
	}
	return prometheus.WrapRegistererWith(c.labels, r)
}

// Shared returns the gatherer of the sources' shared series.
func (c *Cache) Shared() prometheus.Gatherer { return c.shared }

// Encodings returns how many times a target's series were collected and
// encoded since NewCache.
func (c *Cache) Encodings() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.encodings
}

// sharedOf collects a source's shared series.
type sharedOf struct{ p Partitioned }

func (sharedOf) Describe(chan<- *prometheus.Desc)      {}
func (s sharedOf) Collect(ch chan<- prometheus.Metric) { s.p.CollectShared(ch) }

// targetOf collects one target's series of one source.
type targetOf struct {
	p      Partitioned
	target string
}

func (targetOf) Describe(chan<- *prometheus.Desc)      {}
func (t targetOf) Collect(ch chan<- prometheus.Metric) { t.p.CollectTarget(t.target, ch) }

// exposer is a Partitioned that needs to know which targets' series a
// render served (the prober: a reason's zero at its first exposition).
type exposer interface{ Exposed(target string) }

// exposed tells the sources that the targets of snap were served.
func (c *Cache) exposed(snap snapshot) {
	c.mu.Lock()
	sources := slices.Clone(c.sources)
	c.mu.Unlock()
	for _, p := range sources {
		if e, ok := p.(exposer); ok {
			for _, t := range snap.names {
				e.Exposed(t)
			}
		}
	}
}

// snapshot is what a render writes: every target's families in one format,
// sorted by target name, and the errors met.
type snapshot struct {
	names   []string // the targets, sorted
	targets [][]chunk
	errs    []error
}

// Run encodes ahead, every interval until ctx is done, the targets whose
// series changed, in each format a render asked for within keepWarm: a
// render then finds most targets encoded already and only writes their
// bytes. Without Run a render encodes what changed itself.
func (c *Cache) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.tick(now)
		}
	}
}

// tick encodes ahead, at now, the formats due.
func (c *Cache) tick(now time.Time) {
	for f := range numFormats {
		if c.due(f, now) {
			c.update(f)
		}
	}
}

// due says whether Run encodes format f ahead at now: f was rendered
// within keepWarm.
func (c *Cache) due(f Format, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.served[f].IsZero() && now.Sub(c.served[f]) < keepWarm
}

// render brings every target's encoding in format f up to date and returns
// them. Only targets whose version moved are collected and encoded.
func (c *Cache) render(f Format) snapshot {
	c.mu.Lock()
	c.served[f] = time.Now()
	c.mu.Unlock()
	return c.update(f)
}

// update brings every target's encoding in format f up to date and returns
// them. The encoding runs outside the Cache's lock: a render does not wait
// for Run's encoding ahead (both may encode a target that changed at
// once; the result of the job created last is kept, as it read the later
// state).
func (c *Cache) update(f Format) snapshot {
	type job struct {
		e   *entry
		v   uint64
		seq uint64
		enc *encoded
	}
	c.mu.Lock()
	names := map[string]bool{}
	for _, p := range c.sources {
		for _, t := range p.ExpositionTargets() {
			names[t] = true
		}
	}
	for t := range c.targets {
		if !names[t] {
			delete(c.targets, t)
		}
	}
	sorted := make([]string, 0, len(names))
	for t := range names {
		sorted = append(sorted, t)
	}
	sort.Strings(sorted)
	var snap snapshot
	entries := make([]*entry, 0, len(sorted))
	var jobs []job
	for _, t := range sorted {
		e := c.targets[t]
		if e == nil {
			e = &entry{reg: prometheus.NewRegistry()}
			reg := c.wrap(e.reg)
			for _, p := range c.sources {
				if err := reg.Register(targetOf{p, t}); err != nil {
					snap.errs = append(snap.errs, fmt.Errorf("target %q: %w", t, err))
				}
			}
			c.targets[t] = e
		}
		entries = append(entries, e)
		if v := c.version(t); e.encoded[f] == nil || e.encoded[f].version != v {
			c.jobs++
			jobs = append(jobs, job{e: e, v: v, seq: c.jobs})
		}
	}
	c.mu.Unlock()

	for i := range jobs {
		jobs[i].enc = encode(jobs[i].e.reg, f, jobs[i].v, &c.heads[f])
		jobs[i].enc.seq = jobs[i].seq
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.encodings += uint64(len(jobs))
	for _, j := range jobs {
		if cur := j.e.encoded[f]; cur == nil || cur.seq < j.seq {
			j.e.encoded[f] = j.enc
		}
	}
	snap.names = sorted
	snap.targets = make([][]chunk, 0, len(entries))
	for i, e := range entries {
		enc := e.encoded[f]
		if enc.err != nil {
			snap.errs = append(snap.errs, fmt.Errorf("target %q: %w", sorted[i], enc.err))
		}
		if len(enc.fams) > 0 {
			snap.targets = append(snap.targets, enc.fams)
		}
	}
	return snap
}

// version combines the versions of every source for target.
func (c *Cache) version(target string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var b [8]byte
	for _, p := range c.sources {
		v := p.ExpositionVersion(target)
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	return h.Sum64()
}

// encode gathers reg and encodes its families in format f, their heads
// shared through heads and their bodies in one allocation.
func encode(reg *prometheus.Registry, f Format, version uint64, heads *headTable) *encoded {
	mfs, err := reg.Gather()
	enc := &encoded{version: version, err: err, fams: make([]chunk, 0, len(mfs))}
	var buf, bodies bytes.Buffer
	var ends []int // of each family's body in bodies
	for _, mf := range mfs {
		buf.Reset()
		var werr error
		if f == OpenMetrics {
			_, werr = expfmt.MetricFamilyToOpenMetrics(&buf, mf)
		} else {
			_, werr = expfmt.MetricFamilyToText(&buf, mf)
		}
		if werr != nil {
			enc.err = joinErr(enc.err, fmt.Errorf("encoding %s: %w", mf.GetName(), werr))
			continue
		}
		head, body := splitHead(buf.Bytes())
		enc.fams = append(enc.fams, chunk{name: mf.GetName(), head: heads.intern(head)})
		bodies.Write(body)
		ends = append(ends, bodies.Len())
	}
	all := slices.Clone(bodies.Bytes())
	start := 0
	for i, end := range ends {
		enc.fams[i].body = all[start:end:end]
		start = end
	}
	return enc
}

// headTable interns the heads of families (their # HELP, # TYPE and
// # UNIT lines) in one format: a render's reads take no lock.
type headTable struct {
	mu sync.Mutex // serializes writers
	m  atomic.Pointer[map[string][]byte]
}

// maxHeads bounds a headTable: a head beyond it is kept by its target
// alone.
const maxHeads = 4096

// intern returns the table's copy of head, adding one if there is none.
func (t *headTable) intern(head []byte) []byte {
	if m := t.m.Load(); m != nil {
		if h, ok := (*m)[string(head)]; ok {
			return h
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var old map[string][]byte
	if m := t.m.Load(); m != nil {
		old = *m
	}
	if h, ok := old[string(head)]; ok {
		return h
	}
	h := slices.Clone(head)
	if len(old) >= maxHeads {
		return h
	}
	m := make(map[string][]byte, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[string(h)] = h
	t.m.Store(&m)
	return h
}

// splitHead cuts an encoded family into its leading comment lines and its
// samples. A sample line never starts with '#' (an exemplar's "# {" follows
// a sample on its line).
func splitHead(b []byte) (head, body []byte) {
	i := 0
	for i < len(b) && b[i] == '#' {
		nl := bytes.IndexByte(b[i:], '\n')
		if nl < 0 {
			return b, nil
		}
		i += nl + 1
	}
	return b[:i], b[i:]
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	return fmt.Errorf("%w; %w", a, b)
}
