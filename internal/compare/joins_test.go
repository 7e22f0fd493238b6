package compare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/prober"
)

// histProbe is one probe of a histProbes pair.
type histProbe struct {
	start                time.Time
	success              bool
	ttft, tpot, itl, e2e float64
	out                  float64
	load                 float64 // NaN: unknown
}

// histProbes is a ProbeSource over each pair's list of probes, as the
// prober keeps them: Window hands out an immutable snapshot, whose means
// since a time are those of the successful probes that started then or
// later.
type histProbes struct {
	mu     sync.Mutex
	pairs  map[string][]histProbe // "target/module", by start
	models map[string]string
	// meansOnly hides the snapshots' SuccessStarts: the collection then
	// compares the successes counted per slice.
	meansOnly bool
}

func (h *histProbes) record(target, module string, p histProbe) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := target + "/" + module
	h.pairs[key] = append(h.pairs[key], p)
}

func (h *histProbes) Window(target, module string) ProbeWindow {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := histWindow(slices.Clone(h.pairs[target+"/"+module]))
	if h.meansOnly {
		return meansOnlyWindow{w}
	}
	return w
}

type meansOnlyWindow struct{ w histWindow }

func (m meansOnlyWindow) Means(since time.Time) prober.Means { return m.w.Means(since) }

func (h *histProbes) Model(target string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.models[target]
}

func (h *histProbes) MeanTTFT(string, time.Time) (float64, int) { return 0, 0 }

type histWindow []histProbe

func (w histWindow) SuccessStarts(dst []int64, since time.Time) []int64 {
	for _, p := range w {
		if p.success && !p.start.Before(since) {
			dst = append(dst, p.start.UnixNano())
		}
	}
	return dst
}

func (w histWindow) Means(since time.Time) prober.Means {
	var s struct{ ttft, tpot, itl, e2e, out, load float64 }
	var m prober.Means
	for _, p := range w {
		if p.start.Before(since) || !p.success {
			continue
		}
		m.N++
		s.ttft += p.ttft
		s.e2e += p.e2e
		s.out += p.out
		m.NTPOT++
		s.tpot += p.tpot
		m.NITL++
		s.itl += p.itl
		if !math.IsNaN(p.load) {
			m.NLoad++
			s.load += p.load
		}
	}
	div := func(v float64, n int) float64 {
		if n == 0 {
			return math.NaN()
		}
		return v / float64(n)
	}
	m.TTFT, m.E2E, m.OutputTokens = div(s.ttft, m.N), div(s.e2e, m.N), div(s.out, m.N)
	m.TPOT, m.ITL, m.Load = div(s.tpot, m.NTPOT), div(s.itl, m.NITL), div(s.load, m.NLoad)
	return m
}

// loadServer is a ServerSource whose load changes, under a lock.
type loadServer struct {
	mu               sync.Mutex
	running, waiting float64
	loadOK           bool
	stream           float64
}

func (s *loadServer) set(running, waiting float64, ok bool, stream float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running, s.waiting, s.loadOK, s.stream = running, waiting, ok, stream
}

func (s *loadServer) Load(string) (float64, float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.waiting, s.loadOK
}

func (s *loadServer) StreamOutputTokensPerSecond(string) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream, s.stream > 0
}

func (s *loadServer) View(string) (collector.View, bool) { return collector.View{}, false }

// seriesValues returns every series of one collection of c by its
// description and label pairs, the value's bits (NaN-exact).
func seriesValues(t testing.TB, c *Collector) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for k, m := range collectOnce(t, c) {
		out[k] = math.Float64bits(m.GetGauge().GetValue())
	}
	return out
}

// joinsPair returns a Collector computing every join at each collection
// and one reading the joins the events computed, on the same sources and
// clock.
func joinsPair(t *testing.T, probes ProbeSource, server ServerSource, now *time.Time, mu *sync.Mutex) (every, pushed *Collector) {
	t.Helper()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return *now
	}
	every = New(Options{Probes: probes, Server: server})
	pushed = New(Options{Probes: probes, Server: server, Pushed: true})
	for _, c := range []*Collector{every, pushed} {
		c.now = clock
		if err := c.Apply(loadConfig(t, cfgText)); err != nil {
			t.Fatal(err)
		}
	}
	return every, pushed
}

// TestJoinsPushedEqualEveryCollection is the equivalence proof: over 40
// simulated minutes of probes (some close enough to share a slice of the
// window, some failing, some without a load) and scrapes (loads moving,
// failing at times), collected at irregular times, the joins computed at a
// probe's completion and a scrape's arrival give exactly the series, and
// the values bit for bit, that computing every join at every collection
// gives.
func TestJoinsPushedEqualEveryCollection(t *testing.T) {
	for _, meansOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("meansOnly=%v", meansOnly), func(t *testing.T) { joinsEquivalence(t, meansOnly) })
	}
}

func joinsEquivalence(t *testing.T, meansOnly bool) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	probes := &histProbes{pairs: map[string][]histProbe{}, models: map[string]string{"t1": "served"}, meansOnly: meansOnly}
	server := &loadServer{running: 1, waiting: 0, loadOK: true, stream: 40}
	every, pushed := joinsPair(t, probes, server, &now, &mu)
	rng := rand.New(rand.NewPCG(1, 2))
	advance := func(d time.Duration) time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
		return now
	}
	collections, events := 0, 0
	nextProbe, nextScrape := now, now
	for range 2000 {
		at := advance(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		if !at.Before(nextScrape) {
			ok := rng.IntN(10) != 0
			server.set(float64(rng.IntN(4)), float64(rng.IntN(3)), ok, 20+float64(rng.IntN(40)))
			pushed.Scraped("t1")
			pushed.Scraped("t2") // not baselined: nothing
			nextScrape = at.Add(15 * time.Second)
			events++
		}
		if !at.Before(nextProbe) {
			for _, mod := range []string{"m1", "m2"} {
				p := histProbe{start: at.Add(-time.Duration(rng.IntN(900)) * time.Millisecond), success: rng.IntN(6) != 0,
					ttft: 0.1 + rng.Float64()/4, tpot: 0.01 + rng.Float64()/50, itl: 0.01 + rng.Float64()/50,
					e2e: 0.5 + rng.Float64(), out: float64(8 + rng.IntN(32)), load: float64(1 + rng.IntN(6))}
				if rng.IntN(5) == 0 {
					p.load = math.NaN()
				}
				probes.record("t1", mod, p)
				pushed.ProbeRecorded("t1", mod)
			}
			// Mostly one probe per 10 s interval, at times two within a
			// slice of the window (3.75 s).
			gap := 10 * time.Second
			if rng.IntN(4) == 0 {
				gap = time.Duration(500+rng.IntN(3000)) * time.Millisecond
			}
			nextProbe = at.Add(gap)
			events++
		}
		want, got := seriesValues(t, every), seriesValues(t, pushed)
		collections++
		if len(want) != len(got) {
			t.Fatalf("at %v: %d series pushed, %d computed at the collection", at, len(got), len(want))
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("at %v: %s = %v pushed (present %v), %v computed at the collection", at, k, math.Float64frombits(g), ok, math.Float64frombits(v))
			}
		}
	}
	// Every collection of every computes its joins; the pushed one fewer
	// than one per collection: its joins follow the events.
	if e, p := every.Computations(), pushed.Computations(); p*2 > e {
		t.Errorf("%d joins computed pushed, %d at every collection: the pushed collector computes at the collection", p, e)
	}
	t.Logf("%d collections, %d events: %d joins computed at every collection, %d pushed", collections, events, every.Computations(), pushed.Computations())
}

// TestJoinsNotComputedWhileNothingChanged: with the joins pushed, a
// collection while nothing changed (no probe, no scrape, no probe moving
// between the window's slices) computes none; a probe's completion
// computes its pair's, a scrape's arrival its target's (and the pairs whose
// scraped load changed), and the collection after them none either.
func TestJoinsNotComputedWhileNothingChanged(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	probes := &histProbes{pairs: map[string][]histProbe{}, models: map[string]string{"t1": "served"}}
	server := &loadServer{running: 1, waiting: 1, loadOK: true, stream: 40}
	_, c := joinsPair(t, probes, server, &now, &mu)
	for i, mod := range []string{"m1", "m2"} {
		probes.record("t1", mod, histProbe{start: now.Add(time.Duration(-20-i) * time.Second), success: true,
			ttft: 0.25, tpot: 0.02, itl: 0.02, e2e: 0.8, out: 16, load: 3})
	}
	c.Scraped("t1")
	c.ProbeRecorded("t1", "m1")
	c.ProbeRecorded("t1", "m2")
	collect := func(what string) uint64 {
		t.Helper()
		before := c.Computations()
		if n := len(collectOnce(t, c)); n == 0 {
			t.Fatalf("%s: no series", what)
		}
		return c.Computations() - before
	}
	if n := collect("after the events"); n != 0 {
		t.Errorf("the collection after a scrape and two probes computed %d joins, want 0: the events computed them", n)
	}
	if n := collect("again"); n != 0 {
		t.Errorf("a collection while nothing changed computed %d joins, want 0", n)
	}
	mu.Lock()
	now = now.Add(time.Second) // each pair's one probe stays in its slice
	mu.Unlock()
	if n := collect("a second later"); n != 0 {
		t.Errorf("a collection a second later, each probe in its slice, computed %d joins, want 0", n)
	}
	before := c.Computations()
	server.set(2, 1, true, 40)
	c.Scraped("t1")
	if n := c.Computations() - before; n != 3 {
		t.Errorf("a scrape with a new load computed %d joins, want 3 (the target's, its two pairs')", n)
	}
	if n := collect("after the scrape"); n != 0 {
		t.Errorf("the collection after a scrape computed %d joins, want 0", n)
	}
	mu.Lock()
	now = now.Add(time.Minute) // the probes leave the window
	mu.Unlock()
	if n := collect("the probes out of the window"); n != 2 {
		t.Errorf("the collection after the probes left the window computed %d joins, want 2 (its two pairs')", n)
	}
	if n := collect("again"); n != 0 {
		t.Errorf("the next collection computed %d joins, want 0", n)
	}
}

// TestJoinsConcurrent runs probes' completions, scrapes' arrivals,
// configuration changes and collections at once (run with -race); once
// they stop, the pushed joins equal the joins computed at the collection.
func TestJoinsConcurrent(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	probes := &histProbes{pairs: map[string][]histProbe{}, models: map[string]string{"t1": "served"}}
	server := &loadServer{running: 1, waiting: 1, loadOK: true, stream: 40}
	every, pushed := joinsPair(t, probes, server, &now, &mu)
	cfg := loadConfig(t, cfgText)
	var wg sync.WaitGroup
	const rounds = 200
	wg.Add(4)
	go func() { // the prober
		defer wg.Done()
		for i := range rounds {
			for _, mod := range []string{"m1", "m2"} {
				mu.Lock()
				start := now.Add(-time.Duration(i%7) * time.Second)
				mu.Unlock()
				probes.record("t1", mod, histProbe{start: start, success: i%5 != 0, ttft: 0.2, tpot: 0.02, itl: 0.02, e2e: 0.7, out: 16, load: float64(1 + i%4)})
				pushed.ProbeRecorded("t1", mod)
			}
		}
	}()
	go func() { // the collector
		defer wg.Done()
		for i := range rounds {
			server.set(float64(i%3), float64(i%2), i%9 != 0, 30)
			pushed.Scraped("t1")
			if i%50 == 0 {
				pushed.ServersChanged()
			}
		}
	}()
	go func() { // the clock and a reload
		defer wg.Done()
		for i := range rounds {
			mu.Lock()
			now = now.Add(700 * time.Millisecond)
			mu.Unlock()
			if i%80 == 0 {
				if err := pushed.SetTargets(cfg); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	go func() { // Prometheus
		defer wg.Done()
		for range rounds / 4 {
			collectOnce(t, pushed)
		}
	}()
	wg.Wait()
	// Quiesced: the last events' joins are those of the sources now.
	pushed.Scraped("t1")
	want, got := seriesValues(t, every), seriesValues(t, pushed)
	if len(want) != len(got) {
		t.Fatalf("%d series pushed, %d computed at the collection", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v pushed, %v computed at the collection", k, math.Float64frombits(got[k]), math.Float64frombits(v))
		}
	}
}
