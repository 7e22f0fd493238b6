// Package exposition serves the daemon's /metrics from encoded bytes kept
// per target, re-encoding a target's series only when they changed.
//
// Most of a fleet's exposition belongs to its targets: at 1,000 targets,
// 11.6 MB of text of which the daemon's own series are a few kilobytes.
// promhttp gathers, sorts, checks and encodes every series at every
// scrape; here the components that own targets' series (the prober, the
// collector, the joins) implement Partitioned, and a render collects and
// encodes only the parts (a target's series of one component) whose
// version moved since the last render in that format, then writes each
// family's header once and the cached bodies of every part after it.
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
	dto "github.com/prometheus/client_model/go"
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
	// owns need not move it, unless the component is Independent: the
	// cache keys the part of any other by the versions of every
	// component together, but the Private ones (whose state no join
	// reads).
	ExpositionVersion(target string) uint64
	// CollectTarget sends the series of target alone, each with a
	// "target" label of target's name: the cache splits the series of
	// several targets gathered together by that label (CheckTargetLabels).
	CollectTarget(target string, ch chan<- prometheus.Metric)
	// CollectShared sends the series that belong to no target (e.g. a
	// baseline's points); they are collected at every render.
	CollectShared(ch chan<- prometheus.Metric)
}

// Independent is a Partitioned whose series of a target are made of its own
// state alone (the prober's, the collector's): its part of a target is
// encoded again only when its own version moved. The part of a component
// that joins the others' state (the baseline joins read the prober's
// windows and the scraped load) is encoded again when any version of the
// target moved.
type Independent interface {
	Partitioned
	ExpositionIndependent()
}

// Private is an Independent whose state no other component's series read
// (the prober's attempt counts): the parts that join the others' state are
// not encoded again when its version moves.
type Private interface {
	Independent
	ExpositionPrivate()
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
	seed   maphash.Seed      // of combine

	mu      sync.Mutex
	sources []Partitioned
	kinds   []sourceKind // of each source
	targets map[string]*entry
	shared  *prometheus.Registry
	// encodings counts the parts encoded since New (Encodings); jobs
	// numbers the encodings as they are decided (encoded.seq).
	encodings, jobs uint64
	// gathers counts the registries gathered for parts (gatherBatch).
	gathers atomic.Uint64
	// served is when a render last asked for each format: Run keeps the
	// formats asked for within keepWarm encoded ahead.
	served [numFormats]time.Time

	// heads holds each family's comment lines once per format: every
	// target's chunk of a family shares them.
	heads [numFormats]headTable
}

// sourceKind is how the cache keys a source's parts: by its own version
// (Independent), by its own and by no join's (Private), or by every
// source's but the private ones' (a join).
type sourceKind uint8

const (
	joinKind sourceKind = iota
	independentKind
	privateKind
)

func kindOf(p Partitioned) sourceKind {
	switch p.(type) {
	case Private:
		return privateKind
	case Independent:
		return independentKind
	}
	return joinKind
}

// keepWarm is how long after a render in a format Run keeps encoding that
// format ahead: a few scrape intervals.
const keepWarm = 5 * time.Minute

// entry is one target's parts, one per source, in the order of c.sources.
type entry struct {
	parts []*part
}

// part is a target's series of one source: their encoded families per
// format. They are gathered through a registry made for each encoding: a
// registry kept per part held a few KiB per target for nothing.
type part struct {
	encoded [numFormats]*encoded
}

// encoded is a part's families in one format, as of version.
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
	c.kinds = append(c.kinds, kindOf(p))
	clear(c.targets) // every target gains a part
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

// Encodings returns how many times a part (a target's series of one
// source) was collected and encoded since NewCache.
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

// snapshot is what a render writes: every part's families in one format,
// by target name then source, and the errors met.
type snapshot struct {
	names []string // the targets, sorted
	parts [][]chunk
	errs  []error
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
			c.refresh(f)
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

// update brings every part's encoding in format f up to date and returns
// them: the render's pass, which also lists the sources' targets, drops the
// parts of those gone and adds the new ones. The encoding runs outside the
// Cache's lock: a render does not wait for Run's encoding ahead (both may
// encode a part that changed at once; the result of the job created last
// is kept, as it read the later state).
func (c *Cache) update(f Format) snapshot {
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
	entries := make([]*entry, 0, len(sorted))
	var jobs []job
	versions := make([]uint64, len(c.sources))
	for _, t := range sorted {
		e := c.targets[t]
		if e == nil {
			e = &entry{parts: make([]*part, len(c.sources))}
			for i := range e.parts {
				e.parts[i] = &part{}
			}
			c.targets[t] = e
		}
		entries = append(entries, e)
		jobs = c.changed(jobs, t, e, f, versions)
	}
	c.mu.Unlock()

	c.encodeJobs(jobs, f)

	c.mu.Lock()
	defer c.mu.Unlock()
	snap := snapshot{names: sorted, parts: make([][]chunk, 0, len(entries)*len(c.sources))}
	for i, e := range entries {
		for _, pt := range e.parts {
			enc := pt.encoded[f]
			if enc.err != nil {
				snap.errs = append(snap.errs, fmt.Errorf("target %q: %w", sorted[i], enc.err))
			}
			if len(enc.fams) > 0 {
				snap.parts = append(snap.parts, enc.fams)
			}
		}
	}
	return snap
}

// refresh is Run's pass: it encodes in format f the changed parts of the
// targets the last render knew, without listing, sorting or snapshotting
// them (a target new since is added by the next render).
func (c *Cache) refresh(f Format) {
	c.mu.Lock()
	var jobs []job
	versions := make([]uint64, len(c.sources))
	for t, e := range c.targets {
		jobs = c.changed(jobs, t, e, f, versions)
	}
	c.mu.Unlock()
	c.encodeJobs(jobs, f)
}

// job is a part to encode in one format: decided under the Cache's lock,
// encoded outside it.
type job struct {
	p   *part
	of  targetOf
	v   uint64
	seq uint64
	enc *encoded
}

// changed appends to jobs the parts of target t (entry e) whose version
// moved since their encoding in format f; versions is scratch space, one
// per source. c.mu must be held.
func (c *Cache) changed(jobs []job, t string, e *entry, f Format, versions []uint64) []job {
	for i, p := range c.sources {
		versions[i] = p.ExpositionVersion(t)
	}
	var all uint64 // every source's version of t, for the parts that join them
	combined := false
	for i, p := range c.sources {
		v := versions[i]
		if c.kinds[i] == joinKind {
			if !combined {
				all, combined = c.combine(versions), true
			}
			v = all
		}
		if pt := e.parts[i]; pt.encoded[f] == nil || pt.encoded[f].version != v {
			c.jobs++
			jobs = append(jobs, job{p: pt, of: targetOf{p, t}, v: v, seq: c.jobs})
		}
	}
	return jobs
}

// encodeJobs encodes jobs in format f, outside the Cache's lock, and keeps
// each result unless a later job's is kept already. The jobs of one source
// are gathered together (gatherBatch).
func (c *Cache) encodeJobs(jobs []job, f Format) {
	bySource := map[Partitioned][]int{}
	for i := range jobs {
		bySource[jobs[i].of.p] = append(bySource[jobs[i].of.p], i)
	}
	var sc scratch
	for _, idx := range bySource {
		batch, ok := c.gatherBatch(jobs, idx)
		for k, i := range idx {
			if ok {
				jobs[i].enc = c.encodeFamilies(&sc, batch[k], nil, f, jobs[i].v)
			} else {
				jobs[i].enc = c.encodeWith(&sc, jobs[i].of, f, jobs[i].v)
			}
			jobs[i].enc.seq = jobs[i].seq
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.encodings += uint64(len(jobs))
	for _, j := range jobs {
		if cur := j.p.encoded[f]; cur == nil || cur.seq < j.seq {
			j.p.encoded[f] = j.enc
		}
	}
}

// combine hashes versions into one: a part that joins every source's state
// is keyed by all of them, but those of private sources. c.mu must be held.
func (c *Cache) combine(versions []uint64) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var b [8]byte
	for k, v := range versions {
		if c.kinds[k] == privateKind {
			continue
		}
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	return h.Sum64()
}

// targetLabel is the label every series of a target carries its name in.
const targetLabel = "target"

// gatherBatch gathers the parts of jobs[idx] (distinct targets of one
// source) through one registry and returns each one's families, in the
// order of idx. A registry's gathering allocates its metric channels
// (32 KiB) and starts a goroutine, whatever the number of series: once
// per part, that was a quarter of the daemon's allocations at 1,000
// targets (docs/performance.md, P2). The families are split by the target
// label, which keeps each part's series in the order its own gathering
// sorts them. ok is false, and the parts must be gathered one by one,
// when the gathering reports an error (it must be reported with its
// target) or a series names no target of the batch.
func (c *Cache) gatherBatch(jobs []job, idx []int) (batch [][]*dto.MetricFamily, ok bool) {
	if len(idx) < 2 {
		return nil, false
	}
	reg := prometheus.NewRegistry()
	r := c.wrap(reg)
	pos := make(map[string]int, len(idx))
	for k, i := range idx {
		if _, dup := pos[jobs[i].of.target]; dup {
			return nil, false
		}
		pos[jobs[i].of.target] = k
		if err := r.Register(jobs[i].of); err != nil {
			return nil, false
		}
	}
	c.gathers.Add(1)
	mfs, err := reg.Gather()
	if err != nil {
		return nil, false
	}
	batch = make([][]*dto.MetricFamily, len(idx))
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			k, found := -1, false
			for _, l := range m.Label {
				if l.GetName() == targetLabel {
					k, found = pos[l.GetValue()]
					break
				}
			}
			if !found {
				return nil, false
			}
			fams := batch[k]
			if n := len(fams); n == 0 || fams[n-1].GetName() != mf.GetName() {
				fams = append(fams, &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Unit: mf.Unit})
				batch[k] = fams
			}
			fam := fams[len(fams)-1]
			fam.Metric = append(fam.Metric, m)
		}
	}
	return batch, true
}

// CheckTargetLabels collects every source's series of every target and
// returns an error naming a series whose target label is not its target's
// name, which gatherBatch would give to another target's part. For the
// tests of the daemon's components.
func (c *Cache) CheckTargetLabels() error {
	c.mu.Lock()
	sources := slices.Clone(c.sources)
	c.mu.Unlock()
	for _, p := range sources {
		for _, t := range p.ExpositionTargets() {
			reg := prometheus.NewRegistry()
			if err := reg.Register(targetOf{p, t}); err != nil {
				return fmt.Errorf("target %q: registering: %w", t, err)
			}
			mfs, err := reg.Gather()
			if err != nil {
				return fmt.Errorf("target %q: %w", t, err)
			}
			for _, mf := range mfs {
				for _, m := range mf.Metric {
					got := "(none)"
					for _, l := range m.Label {
						if l.GetName() == targetLabel {
							got = l.GetValue()
						}
					}
					if got != t {
						return fmt.Errorf("%T: a series %s of target %q has target label %s", p, mf.GetName(), t, got)
					}
				}
			}
		}
	}
	return nil
}

// encode gathers the series of of, with the cache's labels, and encodes
// their families in format f (encodeFamilies).
func (c *Cache) encode(of targetOf, f Format, version uint64) *encoded {
	return c.encodeWith(&scratch{}, of, f, version)
}

// encodeWith is encode writing through sc.
func (c *Cache) encodeWith(sc *scratch, of targetOf, f Format, version uint64) *encoded {
	reg := prometheus.NewRegistry()
	if err := c.wrap(reg).Register(of); err != nil {
		return &encoded{version: version, err: fmt.Errorf("registering: %w", err)}
	}
	c.gathers.Add(1)
	mfs, err := reg.Gather()
	return c.encodeFamilies(sc, mfs, err, f, version)
}

// scratch is the buffers an encoding writes through, reused from part to
// part: grown anew for every part, they were a seventh of the daemon's
// allocated bytes.
type scratch struct {
	buf, bodies bytes.Buffer
	ends        []int // of each family's body in bodies
}

// encodeFamilies encodes mfs, gathered with error err, in format f through
// sc: their heads shared through the cache's table and their bodies in one
// allocation.
func (c *Cache) encodeFamilies(sc *scratch, mfs []*dto.MetricFamily, err error, f Format, version uint64) *encoded {
	heads := &c.heads[f]
	enc := &encoded{version: version, err: err, fams: make([]chunk, 0, len(mfs))}
	buf, bodies := &sc.buf, &sc.bodies
	bodies.Reset()
	ends := sc.ends[:0]
	for _, mf := range mfs {
		buf.Reset()
		var werr error
		if f == OpenMetrics {
			_, werr = expfmt.MetricFamilyToOpenMetrics(buf, mf)
		} else {
			_, werr = expfmt.MetricFamilyToText(buf, mf)
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
	sc.ends = ends
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
