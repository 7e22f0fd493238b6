package exposition

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// fakeSource is a Partitioned of a few targets, each with a gauge and a
// counter whose values the test sets.
type fakeSource struct {
	mu      sync.Mutex
	pending map[string]bool // the counter renders 0 until a render served it (Exposed)
	values  map[string]float64
	version map[string]uint64
	gauge   *prometheus.Desc
	counter *prometheus.Desc
	shared  *prometheus.Desc
}

func newFakeSource(targets ...string) *fakeSource {
	return newFakeSourceNamed("fake", targets...)
}

// newFakeSourceNamed is newFakeSource with its families named prefix_*.
func newFakeSourceNamed(prefix string, targets ...string) *fakeSource {
	s := &fakeSource{values: map[string]float64{}, version: map[string]uint64{}, pending: map[string]bool{},
		gauge:   prometheus.NewDesc(prefix+"_gauge", "A gauge of a target.", []string{"target"}, nil),
		counter: prometheus.NewDesc(prefix+"_events_total", "Events of a target.", []string{"target", "kind"}, nil),
		shared:  prometheus.NewDesc(prefix+"_shared", "A series of no target.", nil, nil)}
	for i, t := range targets {
		s.values[t] = float64(i)
	}
	return s
}

func (s *fakeSource) set(target string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[target] = v
	s.version[target]++
}

// setNew is set of a counter that renders 0 until a render served it.
func (s *fakeSource) setNew(target string, v float64) {
	s.set(target, v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[target] = true
}

func (s *fakeSource) Exposed(target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[target] {
		s.pending[target] = false
		s.version[target]++
	}
}

func (*fakeSource) Describe(chan<- *prometheus.Desc) {}
func (s *fakeSource) Collect(ch chan<- prometheus.Metric) {
	s.CollectShared(ch)
	for _, t := range s.ExpositionTargets() {
		s.CollectTarget(t, ch)
	}
}
func (s *fakeSource) ExpositionTargets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t := range s.values {
		out = append(out, t)
	}
	return out
}
func (s *fakeSource) ExpositionVersion(target string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version[target]
}
func (s *fakeSource) CollectTarget(target string, ch chan<- prometheus.Metric) {
	s.mu.Lock()
	v, ok := s.values[target]
	count := 2 * v
	if s.pending[target] {
		count = 0
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(s.gauge, prometheus.GaugeValue, v, target)
	ch <- prometheus.MustNewConstMetric(s.counter, prometheus.CounterValue, count, target, "a\"b\\c\n")
}
func (s *fakeSource) CollectShared(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(s.shared, prometheus.GaugeValue, 1)
}

// fixture registers a fakeSource and an ordinary gauge through a
// Registerer, as the daemon does with its vantage label.
func fixture(t *testing.T) (*Cache, *fakeSource, http.Handler, http.Handler) {
	t.Helper()
	return fixtureWith(t, prometheus.Labels{"vantage": "eu"})
}

// fixtureWith is fixture with labels (none: no vantage).
func fixtureWith(t *testing.T, labels prometheus.Labels) (*Cache, *fakeSource, http.Handler, http.Handler) {
	t.Helper()
	main, own := prometheus.NewRegistry(), prometheus.NewRegistry()
	var mainReg, ownReg prometheus.Registerer = main, own
	if len(labels) > 0 {
		mainReg, ownReg = prometheus.WrapRegistererWith(labels, main), prometheus.WrapRegistererWith(labels, own)
	}
	cache := NewCache(labels)
	reg := NewRegisterer(cache, mainReg, ownReg)
	src := newFakeSource("a", "b", "c")
	reg.MustRegister(src)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "daemon_own", Help: "The daemon's own."})
	g.Set(3)
	reg.MustRegister(g)
	cached := cache.Handler(HandlerOpts{Rest: prometheus.Gatherers{own, cache.Shared()}, Full: main})
	full := promhttp.HandlerFor(main, promhttp.HandlerOpts{EnableOpenMetrics: true})
	return cache, src, cached, full
}

func get(t *testing.T, h http.Handler, url, accept string, gz bool) (string, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	if gz != (rec.Header().Get("Content-Encoding") == "gzip") {
		t.Fatalf("Accept-Encoding gzip %v, Content-Encoding %q", gz, rec.Header().Get("Content-Encoding"))
	}
	if gz {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var err2 error
		if body, err2 = io.ReadAll(zr); err2 != nil {
			t.Fatal(err2)
		}
	}
	return rec.Header().Get("Content-Type"), string(body)
}

// sortedLines is body's lines, sorted.
func sortedLines(body string) []string {
	l := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	slices.Sort(l)
	return l
}

const openMetrics = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"

// TestCacheEncodesChanges: a render encodes only the targets whose version
// moved, and says what promhttp says, in text and OpenMetrics, gzipped or
// not, with name[] as promhttp reads it.
func TestCacheEncodesChanges(t *testing.T) {
	t.Run("vantage", func(t *testing.T) { testCacheEncodesChanges(t, prometheus.Labels{"vantage": "eu"}) })
	t.Run("no labels", func(t *testing.T) { testCacheEncodesChanges(t, nil) })
}

func testCacheEncodesChanges(t *testing.T, labels prometheus.Labels) {
	cache, src, cached, full := fixtureWith(t, labels)
	check := func(step string) {
		t.Helper()
		for _, accept := range []string{"", openMetrics} {
			for _, gz := range []bool{false, true} {
				ct, got := get(t, cached, "/metrics", accept, gz)
				wct, want := get(t, full, "/metrics", accept, false)
				if ct != wct {
					t.Errorf("%s: Accept %q: content type %q, promhttp's %q", step, accept, ct, wct)
				}
				if !slices.Equal(sortedLines(got), sortedLines(want)) {
					t.Errorf("%s: Accept %q gzip %v:\n%s\npromhttp:\n%s", step, accept, gz, got, want)
				}
			}
		}
	}
	check("first render")
	n := cache.Encodings()
	if n != 6 { // 3 targets × 2 formats
		t.Errorf("the first renders encoded %d targets, want 6", n)
	}
	check("nothing changed")
	if m := cache.Encodings(); m != n {
		t.Errorf("renders with nothing changed encoded %d targets", m-n)
	}
	src.set("b", 42)
	check("b changed")
	if m := cache.Encodings(); m != n+2 {
		t.Errorf("after b changed the renders encoded %d targets, want 2 (b in each format)", m-n)
	}
	_, body := get(t, cached, "/metrics?name[]=fake_gauge&name[]=daemon_own", "", false)
	want := `# HELP daemon_own The daemon's own.
# TYPE daemon_own gauge
daemon_own{vantage="eu"} 3
# HELP fake_gauge A gauge of a target.
# TYPE fake_gauge gauge
fake_gauge{target="a",vantage="eu"} 0
fake_gauge{target="b",vantage="eu"} 42
fake_gauge{target="c",vantage="eu"} 2
`
	if labels == nil {
		want = strings.NewReplacer(`{vantage="eu"}`, "", `,vantage="eu"}`, "}").Replace(want)
	}
	if body != want {
		t.Errorf("name[] filter:\n%s\nwant:\n%s", body, want)
	}
	_, om := get(t, cached, "/metrics", openMetrics, false)
	if !strings.HasSuffix(om, "# EOF\n") || strings.Count(om, "# TYPE fake_events counter") != 1 {
		t.Errorf("OpenMetrics: one head per family and # EOF at the end:\n%s", om)
	}
	// Protobuf is served by promhttp over the full registry.
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	rec := httptest.NewRecorder()
	cached.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.google.protobuf") || rec.Body.Len() == 0 {
		t.Errorf("protobuf: %q, %d bytes", ct, rec.Body.Len())
	}
}

// fleet is a Cache without labels over one fakeSource of n targets, the
// source and the targets' names.
func fleet(n int) (*Cache, *fakeSource, []string) {
	cache := NewCache(nil)
	var targets []string
	for i := range n {
		targets = append(targets, fmt.Sprintf("t%04d", i))
	}
	src := newFakeSource(targets...)
	NewRegisterer(cache, prometheus.NewRegistry(), prometheus.NewRegistry()).MustRegister(src)
	return cache, src, targets
}

// BenchmarkRender renders 1,000 targets of which changed per cent changed
// since the last render, as text with gzip.
func BenchmarkRender(b *testing.B) {
	for _, changed := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("changed=%d%%", changed), func(b *testing.B) {
			cache, src, targets := fleet(1000)
			h := cache.Handler(HandlerOpts{Rest: cache.Shared(), Full: prometheus.NewRegistry()})
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept-Encoding", "gzip")
			i := 0
			for b.Loop() {
				for range changed * 10 {
					src.set(targets[i%len(targets)], float64(i))
					i++
				}
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}

// BenchmarkPassNothingChanged is one pass of Run over 1,000 targets of
// which none changed: what a pass costs when it has nothing to encode.
func BenchmarkPassNothingChanged(b *testing.B) {
	cache, _, _ := fleet(1000)
	cache.render(Text)
	now := time.Now()
	for b.Loop() {
		cache.tick(now)
	}
	if n := cache.Encodings(); n != 1000 {
		b.Fatalf("%d encodings, want the first render's 1000", n)
	}
}

// TestRunEncodesAhead: with Run going, a target that changed is encoded
// before the next render, in the formats rendered lately, and that render
// encodes nothing.
func TestRunEncodesAhead(t *testing.T) {
	cache, src, cached, full := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cache.Run(ctx, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	get(t, cached, "/metrics", "", true) // text, now kept warm
	n := cache.Encodings()
	src.set("a", 7)
	deadline := time.Now().Add(5 * time.Second)
	for cache.Encodings() == n {
		if time.Now().After(deadline) {
			t.Fatal("Run never encoded the changed target")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := cache.Encodings(); m != n+1 {
		t.Errorf("Run encoded %d targets, want 1 (a, in text only: OpenMetrics was never asked for)", m-n)
	}
	n = cache.Encodings()
	_, got := get(t, cached, "/metrics", "", false)
	_, want := get(t, full, "/metrics", "", false)
	if m := cache.Encodings(); m != n {
		t.Errorf("the render after Run encoded %d targets, want 0", m-n)
	}
	if !slices.Equal(sortedLines(got), sortedLines(want)) {
		t.Errorf("render after Run:\n%s\npromhttp:\n%s", got, want)
	}
}

// TestZeroServedBeforeCount: a counter whose source renders 0 until a
// render served it (the prober's reasons at their first exposition) is
// served as 0 once and then as its count, although Run encodes ahead: the
// encoding ahead does not count as serving it.
func TestZeroServedBeforeCount(t *testing.T) {
	cache, src, cached, _ := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cache.Run(ctx, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	get(t, cached, "/metrics", "", false) // text, kept warm
	src.setNew("b", 42)
	line := func(v string) string { return `fake_events_total{kind="a\"b\\c\n",target="b",vantage="eu"} ` + v }
	time.Sleep(100 * time.Millisecond) // Run encodes b ahead, more than once
	if _, body := get(t, cached, "/metrics", "", false); !strings.Contains(body, line("0")) {
		t.Fatalf("the first render after the change does not serve the zero:\n%s", body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := get(t, cached, "/metrics", "", false)
		if strings.Contains(body, line("84")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the count never followed the zero:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHeadsShared: the targets' chunks of a family share one copy of its
// head.
func TestHeadsShared(t *testing.T) {
	cache, _, cached, _ := fixture(t)
	get(t, cached, "/metrics", "", false)
	a, b := cache.targets["a"].parts[0].encoded[Text], cache.targets["b"].parts[0].encoded[Text]
	if len(a.fams) == 0 || len(a.fams) != len(b.fams) {
		t.Fatalf("targets a and b have %d and %d families", len(a.fams), len(b.fams))
	}
	for i := range a.fams {
		if &a.fams[i].head[0] != &b.fams[i].head[0] {
			t.Errorf("family %s: targets a and b hold a head each", a.fams[i].name)
		}
	}
}

// independentSource is a fakeSource whose series read its own state alone.
type independentSource struct{ *fakeSource }

func (independentSource) ExpositionIndependent() {}

// privateSource is an independentSource no join reads.
type privateSource struct{ independentSource }

func (privateSource) ExpositionPrivate() {}

// TestPartsEncodedApart: a target's series are encoded per source; a
// change of an Independent source encodes its part again and the parts of
// the sources that join the others (not Independent), but not the part of
// another Independent source; a change of a Private source encodes its
// part alone.
func TestPartsEncodedApart(t *testing.T) {
	main, own := prometheus.NewRegistry(), prometheus.NewRegistry()
	cache := NewCache(nil)
	reg := NewRegisterer(cache, main, own)
	a := independentSource{newFakeSourceNamed("a", "x", "y", "z")}
	b := independentSource{newFakeSourceNamed("b", "x", "y", "z")}
	joins := newFakeSourceNamed("joins", "x", "y", "z")
	private := privateSource{independentSource{newFakeSourceNamed("p", "x", "y", "z")}}
	reg.MustRegister(a, b, joins, private)
	cached := cache.Handler(HandlerOpts{Rest: prometheus.Gatherers{own, cache.Shared()}, Full: main})
	full := promhttp.HandlerFor(main, promhttp.HandlerOpts{})
	step := func(name string, want uint64) {
		t.Helper()
		n := cache.Encodings()
		_, got := get(t, cached, "/metrics", "", false)
		_, wantBody := get(t, full, "/metrics", "", false)
		if m := cache.Encodings() - n; m != want {
			t.Errorf("%s: %d parts encoded, want %d", name, m, want)
		}
		if !slices.Equal(sortedLines(got), sortedLines(wantBody)) {
			t.Errorf("%s:\n%s\npromhttp:\n%s", name, got, wantBody)
		}
	}
	step("first render", 12) // 3 targets × 4 sources
	step("nothing changed", 0)
	a.set("y", 5)
	step("a's y changed", 2) // a's part of y and the joins' part of y
	joins.set("z", 6)
	step("the joins' z changed", 1)
	private.set("x", 7)
	step("the private source's x changed", 1) // its part of x alone
}

// TestNewTargetAtRender: Run's passes encode the targets a render knew;
// a target that appeared since is encoded by the next render, which
// serves it as promhttp does.
func TestNewTargetAtRender(t *testing.T) {
	cache, src, cached, full := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cache.Run(ctx, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	get(t, cached, "/metrics", "", false)
	src.set("d", 9)
	time.Sleep(50 * time.Millisecond) // passes run
	_, got := get(t, cached, "/metrics", "", false)
	_, want := get(t, full, "/metrics", "", false)
	if !strings.Contains(got, `fake_gauge{target="d",vantage="eu"} 9`) || !slices.Equal(sortedLines(got), sortedLines(want)) {
		t.Errorf("render after a new target:\n%s\npromhttp:\n%s", got, want)
	}
}

// dupSource is a fakeSource whose target dup sends its gauge twice: the
// gathering of that target fails.
type dupSource struct {
	*fakeSource
	dup string
}

func (s dupSource) CollectTarget(target string, ch chan<- prometheus.Metric) {
	s.fakeSource.CollectTarget(target, ch)
	if target == s.dup {
		ch <- prometheus.MustNewConstMetric(s.gauge, prometheus.GaugeValue, 1, target)
	}
}

// The parts of one source that changed are gathered through one registry,
// and each is encoded exactly as when gathered alone, with and without a
// vantage label; a target whose series cannot be gathered fails alone,
// named in the error, as it would gathered alone.
func TestPartsGatheredTogether(t *testing.T) {
	for _, labels := range []prometheus.Labels{nil, {"vantage": "eu"}} {
		t.Run(fmt.Sprint(labels), func(t *testing.T) {
			cache := NewCache(labels)
			var targets []string
			for i := range 50 {
				targets = append(targets, fmt.Sprintf("t%02d", i))
			}
			src := newFakeSource(targets...)
			NewRegisterer(cache, prometheus.NewRegistry(), prometheus.NewRegistry()).MustRegister(src)
			g := cache.gathers.Load()
			snap := cache.render(Text)
			if n := cache.gathers.Load() - g; n != 1 {
				t.Errorf("%d registries gathered for the 50 parts of one source, want 1", n)
			}
			if len(snap.errs) != 0 || len(snap.parts) != 50 {
				t.Fatalf("%d parts, errors %v; want 50 parts and none", len(snap.parts), snap.errs)
			}
			for i, tgt := range targets {
				alone := cache.encode(targetOf{src, tgt}, Text, 0)
				if alone.err != nil {
					t.Fatal(alone.err)
				}
				if got, want := chunksText(snap.parts[i]), chunksText(alone.fams); got != want {
					t.Fatalf("target %s gathered with the others:\n%s\nalone:\n%s", tgt, got, want)
				}
			}
		})
	}
	t.Run("a failing target", func(t *testing.T) {
		cache := NewCache(nil)
		src := dupSource{newFakeSource("a", "b", "c"), "b"}
		NewRegisterer(cache, prometheus.NewRegistry(), prometheus.NewRegistry()).MustRegister(src)
		snap := cache.render(Text)
		if len(snap.errs) != 1 || !strings.Contains(snap.errs[0].Error(), `target "b"`) {
			t.Fatalf("errors %v, want one naming target b", snap.errs)
		}
		var text []string
		for _, p := range snap.parts {
			text = append(text, chunksText(p))
		}
		for _, want := range []string{`fake_gauge{target="a"} 0`, `fake_gauge{target="c"} 2`} {
			if !strings.Contains(strings.Join(text, ""), want) {
				t.Errorf("the other targets' series lack %q:\n%s", want, strings.Join(text, ""))
			}
		}
	})
}

// chunksText is a part's families as they render.
func chunksText(fams []chunk) string {
	var b strings.Builder
	for _, c := range fams {
		b.Write(c.head)
		b.Write(c.body)
	}
	return b.String()
}

// wrongTarget is a fakeSource whose target b sends a's name in its target
// label.
type wrongTarget struct{ *fakeSource }

func (s wrongTarget) CollectTarget(target string, ch chan<- prometheus.Metric) {
	if target == "b" {
		ch <- prometheus.MustNewConstMetric(s.gauge, prometheus.GaugeValue, 1, "a")
		return
	}
	s.fakeSource.CollectTarget(target, ch)
}

// CheckTargetLabels names a series whose target label is another target's.
func TestCheckTargetLabels(t *testing.T) {
	cache := NewCache(nil)
	NewRegisterer(cache, prometheus.NewRegistry(), prometheus.NewRegistry()).MustRegister(newFakeSource("a", "b"))
	if err := cache.CheckTargetLabels(); err != nil {
		t.Fatalf("a source keeping the contract: %v", err)
	}
	cache = NewCache(nil)
	NewRegisterer(cache, prometheus.NewRegistry(), prometheus.NewRegistry()).MustRegister(wrongTarget{newFakeSource("a", "b")})
	if err := cache.CheckTargetLabels(); err == nil || !strings.Contains(err.Error(), `of target "b" has target label a`) {
		t.Fatalf("CheckTargetLabels = %v, want the series of b labelled a named", err)
	}
}
