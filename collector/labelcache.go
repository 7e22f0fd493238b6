package collector

import (
	"sync"

	dto "github.com/prometheus/client_model/go"
)

// seriesLabels is what a sample line's series says besides its name: the
// label pairs but the name and the family's special label (le of a
// histogram bucket, quantile of a summary), and that label's value.
type seriesLabels struct {
	pairs []*dto.LabelPair
	bound float64
}

// labelCache remembers, by the bytes of a series ("name{a="b",le="1"}"),
// the labels the text decoder built from them. A target sends the same
// series at every scrape, and the replicas of a deployment the same series
// as each other (the same model_name and engine), so most samples of a
// scrape find their labels here instead of parsing them and allocating
// their pairs again: parsing labels and building their pairs was half the
// decoder's CPU and most of its allocations (docs/performance.md, P2).
//
// The cached pairs are shared by every family decoded through the cache,
// of every target: the families' readers never modify a label pair.
// It is bounded at two generations of maxCachedSeries series each: a full
// generation becomes the old one, whose series move to the new one as they
// are met again, so a fleet's series stay cached while the series of a
// target that sends new ones at every scrape cost at most 2×maxCachedSeries
// entries. A nil *labelCache caches nothing. Safe for concurrent use.
type labelCache struct {
	mu       sync.Mutex
	cur, old *cacheGen
}

// maxCachedSeries bounds a generation of a labelCache: a vLLM server sends
// about 150 series the profiles read, so a generation holds a fleet of 50
// distinct label sets (models, engines) with room to spare.
const maxCachedSeries = 8192

// A series' labels depend on the parser (Prometheus text or OpenMetrics)
// and on the special label its family's type gives it.
const (
	numSpecials   = 3 // "", le, quantile
	numCacheKinds = 2 * numSpecials
)

type cacheGen struct {
	n int
	m [numCacheKinds]map[string]seriesLabels
}

func newCacheGen() *cacheGen {
	g := &cacheGen{}
	for i := range g.m {
		g.m[i] = map[string]seriesLabels{}
	}
	return g
}

func newLabelCache() *labelCache {
	return &labelCache{cur: newCacheGen(), old: newCacheGen()}
}

// cacheKind indexes a generation's maps.
func cacheKind(openMetrics bool, special string) int {
	k := 0
	switch special {
	case "le":
		k = 1
	case "quantile":
		k = 2
	}
	if openMetrics {
		k += numSpecials
	}
	return k
}

// get returns the labels cached for series of kind.
func (c *labelCache) get(kind int, series []byte) (seriesLabels, bool) {
	if c == nil {
		return seriesLabels{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sl, ok := c.cur.m[kind][string(series)]; ok {
		return sl, true
	}
	sl, ok := c.old.m[kind][string(series)]
	if ok {
		delete(c.old.m[kind], string(series))
		c.old.n--
		c.addLocked(kind, string(series), sl)
	}
	return sl, ok
}

// put caches sl as the labels of series of kind.
func (c *labelCache) put(kind int, series []byte, sl seriesLabels) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur.m[kind][string(series)]; !ok {
		c.addLocked(kind, string(series), sl)
	}
}

func (c *labelCache) addLocked(kind int, series string, sl seriesLabels) {
	if c.cur.n >= maxCachedSeries {
		c.old, c.cur = c.cur, newCacheGen()
	}
	c.cur.m[kind][series] = sl
	c.cur.n++
}

// len is how many series the cache holds.
func (c *labelCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur.n + c.old.n
}
