package exposition

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// HandlerOpts configures Handler.
type HandlerOpts struct {
	// Rest gathers every series the cache does not hold: the daemon's own
	// and the sources' shared ones (Cache.Shared).
	Rest prometheus.Gatherer
	// Full gathers every series, the cache's sources' included: formats
	// the cache does not encode (protobuf, OpenMetrics 2.0) are served
	// from it by promhttp.
	Full prometheus.Gatherer
	// ErrorLog, when set, is told of errors met while gathering.
	ErrorLog promhttp.Logger
	// MaxRequestsInFlight bounds concurrent renders; 0: unbounded.
	MaxRequestsInFlight int
	// GzipLevel is the compression level of gzip answers (compress/gzip's
	// levels); 0 means gzip.DefaultCompression.
	GzipLevel int
}

// Handler returns the /metrics handler of c: it negotiates the format as
// promhttp does with OpenMetrics enabled, answers text and OpenMetrics 1.0
// from the cache, compressed with gzip when the client accepts it, and
// every other format through promhttp over opts.Full.
func (c *Cache) Handler(opts HandlerOpts) http.Handler {
	fallback := promhttp.HandlerFor(opts.Full, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		ErrorLog:          opts.ErrorLog,
		EnableOpenMetrics: true,
	})
	level := opts.GzipLevel
	if level == 0 {
		level = gzip.DefaultCompression
	}
	h := &handler{c: c, opts: opts, fallback: fallback, gzipPool: sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, level)
		return w
	}}}
	if opts.MaxRequestsInFlight > 0 {
		h.inFlight = make(chan struct{}, opts.MaxRequestsInFlight)
	}
	return h
}

type handler struct {
	c        *Cache
	opts     HandlerOpts
	fallback http.Handler
	inFlight chan struct{}
	gzipPool sync.Pool
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.inFlight != nil {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", cap(h.inFlight)), http.StatusServiceUnavailable)
			return
		}
	}
	contentType := expfmt.NegotiateAccept(r.Header, expfmt.DefaultOpenMetricsAcceptedFormats()...)
	var f Format
	switch contentType.FormatType() {
	case expfmt.TypeTextPlain:
		f = Text
	case expfmt.TypeOpenMetrics:
		if v := openMetricsVersion(contentType); v != "" && v != expfmt.OpenMetricsVersion_1_0_0 && v != expfmt.OpenMetricsVersion_0_0_1 {
			h.fallback.ServeHTTP(w, r)
			return
		}
		f = OpenMetrics
	default:
		h.fallback.ServeHTTP(w, r)
		return
	}

	rest, err := h.opts.Rest.Gather()
	h.logErr("error gathering metrics:", err)
	snap := h.c.render(f)
	for _, err := range snap.errs {
		h.logErr("error gathering metrics:", err)
	}

	w.Header().Add("Vary", "Accept")
	w.Header().Add("Vary", "Accept-Encoding")
	w.Header().Set("Content-Type", string(contentType))
	var out io.Writer = w
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.Header().Set("Content-Encoding", "gzip")
		gz := h.gzipPool.Get().(*gzip.Writer)
		gz.Reset(w)
		defer func() {
			_ = gz.Close()
			h.gzipPool.Put(gz)
		}()
		out = gz
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	defer bw.Flush()
	filter := nameFilter(r)
	h.logErr("error encoding and sending metric family:", write(bw, contentType, rest, snap, filter))
	if filter == nil {
		h.c.exposed(snap)
	}
}

func (h *handler) logErr(msg string, err error) {
	if err != nil && h.opts.ErrorLog != nil {
		h.opts.ErrorLog.Println(msg, err)
	}
}

// group is one family of the answer: the daemon's own (rest) and each
// target's body, under one head.
type group struct {
	name   string
	rest   *dto.MetricFamily
	head   []byte
	bodies [][]byte
}

// write writes rest and the targets' families of snap, merged by family
// name and sorted, in contentType. A family of rest is encoded with its
// head; the targets' bodies of the same name follow it.
func write(w io.Writer, contentType expfmt.Format, rest []*dto.MetricFamily, snap snapshot, filter map[string]bool) error {
	index := map[string]int{}
	var groups []*group
	get := func(name string) *group {
		if i, ok := index[name]; ok {
			return groups[i]
		}
		g := &group{name: name}
		index[name] = len(groups)
		groups = append(groups, g)
		return g
	}
	for _, mf := range rest {
		if filter == nil || filter[mf.GetName()] {
			get(mf.GetName()).rest = mf
		}
	}
	for _, fams := range snap.parts {
		for i := range fams {
			ch := &fams[i]
			if filter != nil && !filter[ch.name] {
				continue
			}
			g := get(ch.name)
			if g.head == nil {
				g.head = ch.head
			}
			g.bodies = append(g.bodies, ch.body)
		}
	}
	slices.SortFunc(groups, func(a, b *group) int { return strings.Compare(a.name, b.name) })

	enc := expfmt.NewEncoder(w, contentType)
	var errs []error
	for _, g := range groups {
		if g.rest != nil {
			if err := enc.Encode(g.rest); err != nil {
				errs = append(errs, err)
				continue
			}
		} else if _, err := w.Write(g.head); err != nil {
			return err
		}
		for _, b := range g.bodies {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
	}
	if closer, ok := enc.(expfmt.Closer); ok {
		errs = append(errs, closer.Close()) // OpenMetrics' "# EOF"
	}
	return errors.Join(errs...)
}

// nameFilter returns the families asked for with name[], as promhttp reads
// them; nil: every family.
func nameFilter(r *http.Request) map[string]bool {
	if r.URL == nil {
		return nil
	}
	names := r.URL.Query()["name[]"]
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// openMetricsVersion returns the version parameter of an OpenMetrics
// content type, "" when it has none.
func openMetricsVersion(f expfmt.Format) string {
	for _, p := range strings.Split(string(f), ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && k == "version" {
			return v
		}
	}
	return ""
}

// acceptsGzip tells whether an Accept-Encoding header accepts gzip (or *)
// with a q-value above 0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}
