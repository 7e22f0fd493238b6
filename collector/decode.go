package collector

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// vllmFamilies are the families vLLM's rules (normaliseVLLM) read, under
// every naming era; engines that re-export them under another prefix are
// read through the same list (Profile.VLLMPrefixes).
var vllmFamilies = map[string]bool{
	mRunning: true, mWaiting: true, mWaitingByReason: true, mSwapped: true,
	mKVUsage: true, mGPUCacheUsage: true, mCPUCacheUsage: true,
	mPromptTokens: true, mGenTokens: true, mPreemptions: true,
	mPrefixQueries: true, mPrefixHits: true, mGPUPrefixQ: true, mGPUPrefixH: true,
	mRequestSuccess: true, mTTFT: true, mITL: true, mTPOTOld: true, mE2E: true,
	mQueue: true, mReqGenTokens: true, mCacheConfig: true,
	mGPUPrefixHitRate: true, mCPUPrefixHitRate: true, mPrefill: true,
	mSleepState: true, mSpecDrafts: true, mSpecDraftTokens: true, mSpecAccepted: true,
	mNixlXferTime: true, mNixlFailed: true,
	mPromptBySource: true, mPromptCached: true, mFLOPsPerGPU: true, mReadBytesPerGPU: true, mWriteBytesPerGPU: true,
	mKVBlockLifetime: true, mAdmissionRejects: true,
}

// readFamilies maps every metric family normalise reads (those of every
// engine profile, Profile.Families) to itself: the one copy of the name that
// every decoded family of that name is keyed by. A text or OpenMetrics body
// is decoded into client_model structures for these families only: a vLLM
// server exposes ~450 samples, two thirds of them in families the collector
// never looks at (prefill, decode, inference-time, iteration and
// request-parameter histograms, _created samples, process and Python
// metrics), and decoding those was most of the collector's CPU time
// (docs/performance.md, P2). A name normalise reads must be listed here:
// TestFamilyFilterSameSnapshot compares wanted-only and whole decodes of
// every fixture and fails otherwise.
var readFamilies = func() map[string]string {
	m := map[string]string{}
	for _, p := range profiles {
		for _, f := range p.Families() {
			m[f] = f
		}
	}
	return m
}()

// bodyPool holds the buffers scrape bodies are read into: a vLLM body is
// ~50 KB, read every scrape_interval for every target.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decodeFamilies decodes an exposition in format. With wantedOnly, a text
// or OpenMetrics body yields only the families normalise reads
// (readFamilies); every line is still parsed, so a body that is not an
// exposition (an HTML error page, say) or a malformed line anywhere fails
// the decode, naming the line. Protobuf is decoded whole.
//
// A text or OpenMetrics body whose last line has no final newline is
// accepted (prometheus_client always ends its lines, but bodies stored or
// relayed by other tools may not).
func decodeFamilies(r io.Reader, format expfmt.Format, wantedOnly bool) (families, error) {
	fs, _, err := decodeFamiliesSeen(r, format, wantedOnly, nil)
	return fs, err
}

// decodeFamiliesSeen is decodeFamilies that also names the first
// maxFamiliesSeen families of a text or OpenMetrics body, read or not, for
// the warning about a payload no profile reads (nil for protobuf, whose
// families are all decoded). A text or OpenMetrics body's labels are read
// from and kept in cache (nil: none).
func decodeFamiliesSeen(r io.Reader, format expfmt.Format, wantedOnly bool, cache *labelCache) (families, []string, error) {
	if format.FormatType() == expfmt.TypeProtoDelim {
		fs, err := decodeProto(r)
		return fs, nil, err
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 { // do not keep an outsized body's buffer
			buf.Reset()
			bodyPool.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, nil, err
	}
	if b := buf.Bytes(); len(b) > 0 && b[len(b)-1] != '\n' {
		buf.WriteByte('\n')
	}
	// The text parser appends a newline of its own: leave room for it so
	// that it parses the pooled buffer in place.
	buf.Grow(1)
	openMetrics := format.FormatType() == expfmt.TypeOpenMetrics
	d := textDecoder{body: buf.Bytes(), fs: families{}, wantedOnly: wantedOnly, cache: cache, openMetrics: openMetrics}
	if err := d.decode(); err != nil {
		return nil, nil, err
	}
	return d.fs, d.seen, nil
}

func decodeProto(r io.Reader) (families, error) {
	dec := expfmt.NewDecoder(r, expfmt.NewFormat(expfmt.TypeProtoDelim))
	fs := families{}
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if errors.Is(err, io.EOF) {
			return fs, nil
		}
		if err != nil {
			return nil, err
		}
		if prev, ok := fs[mf.GetName()]; ok {
			prev.Metric = append(prev.Metric, mf.Metric...)
			continue
		}
		fs[mf.GetName()] = mf
	}
}

// textDecoder turns the entries of Prometheus' own text or OpenMetrics
// parser into client_model families, as expfmt's text parser groups them:
// the samples of a histogram or summary family (named by its # TYPE line)
// into one metric per label set, every other sample into the family of its
// own name (so an OpenMetrics counter family "x" yields samples of a family
// "x_total"), of the type its # TYPE line gives when the names match, else
// untyped. Lines of families not wanted are parsed and dropped before their
// labels are built; the labels of those wanted come from cache when it
// holds their series.
type textDecoder struct {
	body        []byte
	fs          families
	wantedOnly  bool
	openMetrics bool
	cache       *labelCache
	seen        []string
	typed       bool // a # TYPE line was seen: seen names families by those

	meta     []byte           // family of the last # TYPE line
	metaType model.MetricType // its type
	last     int              // offset in body of the last entry read
	read     bool             // an entry was read
	lbls     labels.Labels

	// Slabs the buckets and the numbers the families point to are cut
	// from: a histogram's buckets are most of a vLLM body's samples.
	buckets []dto.Bucket
	floats  []float64
	counts  []uint64
}

func (d *textDecoder) decode() error {
	var p textparse.Parser
	st := labels.NewSymbolTable()
	if d.openMetrics {
		p = textparse.NewOpenMetricsParser(d.body, st)
	} else {
		p = textparse.NewPromParser(d.body, st, false)
	}
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", d.errorLine(), err)
		}
		d.read = true
		switch e {
		case textparse.EntryType:
			name, t := p.Type()
			d.meta, d.metaType = name, t
			d.note(name)
			d.noteSeen(name, true)
		case textparse.EntryHelp:
			name, _ := p.Help()
			d.note(name)
		case textparse.EntryUnit:
			name, _ := p.Unit()
			d.note(name)
		case textparse.EntryComment:
			d.note(p.Comment())
		case textparse.EntrySeries:
			series, ts, v := p.Series()
			d.note(series)
			if err := d.sample(p, series, ts, v); err != nil {
				return fmt.Errorf("line %d: %w", d.lineOf(d.last), err)
			}
		case textparse.EntryHistogram:
			series, _, _, _ := p.Histogram()
			d.note(series)
		}
	}
}

// note records that the entry whose bytes b lie in d.body was read: b is a
// slice of the body (the parsers return slices of it), so its offset is the
// difference of the capacities.
func (d *textDecoder) note(b []byte) {
	if len(b) == 0 || cap(b) > cap(d.body) {
		return
	}
	if off := cap(d.body) - cap(b); off <= len(d.body) {
		d.last = max(d.last, off)
	}
}

// errorLine is the line a parse error is on: the first line after that of
// the last entry read that is not blank (the parsers skip blank lines).
func (d *textDecoder) errorLine() int {
	off := 0
	if d.read {
		off = len(d.body)
		if nl := bytes.IndexByte(d.body[d.last:], '\n'); nl >= 0 {
			off = d.last + nl + 1
		}
	}
	for off < len(d.body) {
		nl := bytes.IndexByte(d.body[off:], '\n')
		if nl < 0 || len(bytes.TrimSpace(d.body[off:off+nl])) > 0 {
			break
		}
		off += nl + 1
	}
	return d.lineOf(off)
}

// lineOf is the 1-based line of body offset off.
func (d *textDecoder) lineOf(off int) int {
	off = min(max(off, 0), len(d.body))
	return bytes.Count(d.body[:off], []byte{'\n'}) + 1
}

// noteSeen records a family name for the warning about an unread payload:
// the names of # TYPE lines, or in a body without metadata those of samples.
func (d *textDecoder) noteSeen(name []byte, typeLine bool) {
	if typeLine {
		d.typed = true
	} else if d.typed {
		return
	}
	if len(d.seen) >= maxFamiliesSeen || slices.ContainsFunc(d.seen, func(s string) bool { return s == string(name) }) {
		return
	}
	d.seen = append(d.seen, string(name))
}

// sample adds the series sample just read to its family, if wanted.
func (d *textDecoder) sample(p textparse.Parser, series []byte, ts *int64, v float64) error {
	name := metricName(series)
	if name == nil { // a quoted name inside the braces
		p.Labels(&d.lbls)
		name = []byte(d.lbls.Get(model.MetricNameLabel))
	}
	d.noteSeen(name, false)
	family, suffix, typ := name, []byte(nil), model.MetricTypeUnknown
	switch d.metaType {
	case model.MetricTypeHistogram, model.MetricTypeSummary:
		if rest, ok := bytes.CutPrefix(name, d.meta); ok {
			switch string(rest) {
			case "_bucket":
				if d.metaType == model.MetricTypeHistogram {
					family, suffix, typ = d.meta, rest, d.metaType
				}
			case "_sum", "_count":
				family, suffix, typ = d.meta, rest, d.metaType
			case "":
				if d.metaType == model.MetricTypeSummary {
					family, suffix, typ = d.meta, rest, d.metaType
				}
			}
		}
	case model.MetricTypeCounter, model.MetricTypeGauge:
		if bytes.Equal(name, d.meta) {
			typ = d.metaType
		}
	}
	key, ok := readFamilies[string(family)]
	if !ok {
		if d.wantedOnly {
			return nil
		}
		key = string(family)
	}
	mf := d.fs[key]
	if mf == nil {
		name := key
		mf = &dto.MetricFamily{Name: &name, Type: dtoType(typ)}
		d.fs[key] = mf
	}
	aggregate, special := false, ""
	switch typ {
	case model.MetricTypeHistogram, model.MetricTypeSummary:
		aggregate = true
		switch {
		case string(suffix) == "_bucket":
			special = model.BucketLabel
		case len(suffix) == 0 && mf.GetType() == dto.MetricType_SUMMARY:
			special = model.QuantileLabel
		}
	}
	sl, err := d.labelsOf(p, series, mf, aggregate, special)
	if err != nil {
		return err
	}
	if aggregate {
		d.addToAggregate(mf, string(suffix), sl, ts, v)
		return nil
	}
	m := &dto.Metric{Label: sl.pairs}
	switch typ {
	case model.MetricTypeCounter:
		m.Counter = &dto.Counter{Value: d.float(v)}
	case model.MetricTypeGauge:
		m.Gauge = &dto.Gauge{Value: d.float(v)}
	default:
		m.Untyped = &dto.Untyped{Value: d.float(v)}
	}
	m.TimestampMs = ts
	mf.Metric = append(mf.Metric, m)
	return nil
}

// labelsOf returns the labels of the series just read by p, a sample of
// family mf whose special label (le, quantile) is special, from the cache
// when it holds series.
//
// The samples of a histogram's or a summary's series come in a row: when
// the last metric of mf has the same labels, its pairs are shared rather
// than built again.
func (d *textDecoder) labelsOf(p textparse.Parser, series []byte, mf *dto.MetricFamily, aggregate bool, special string) (seriesLabels, error) {
	kind := cacheKind(d.openMetrics, special)
	if sl, ok := d.cache.get(kind, series); ok {
		return sl, nil
	}
	p.Labels(&d.lbls)
	var sl seriesLabels
	if n := len(mf.Metric); aggregate && n > 0 && sameLabels(mf.Metric[n-1].Label, d.lbls, special) {
		sl.pairs = mf.Metric[n-1].Label
	} else {
		sl.pairs = labelPairs(d.lbls, special)
	}
	if special != "" {
		s := d.lbls.Get(special)
		if s == "" {
			return seriesLabels{}, fmt.Errorf("%s sample without a %q label", mf.GetName(), special)
		}
		var err error
		if sl.bound, err = strconv.ParseFloat(s, 64); err != nil {
			return seriesLabels{}, fmt.Errorf("%s: %q label %q: %w", mf.GetName(), special, s, err)
		}
	}
	d.cache.put(kind, series, sl)
	return sl, nil
}

// addToAggregate adds a sample (suffix "_bucket", "_sum", "_count", or ""
// for a summary's quantile) of labels sl to the metric of its label set in
// histogram or summary family mf.
func (d *textDecoder) addToAggregate(mf *dto.MetricFamily, suffix string, sl seriesLabels, ts *int64, v float64) {
	m := d.aggregateMetric(mf, sl.pairs)
	m.TimestampMs = ts
	bound := sl.bound
	if mf.GetType() == dto.MetricType_HISTOGRAM {
		h := m.Histogram
		switch suffix {
		case "_bucket":
			h.Bucket = append(h.Bucket, d.bucket(bound, v))
		case "_sum":
			h.SampleSum = d.float(v)
		case "_count":
			h.SampleCount = d.count(v)
		}
		return
	}
	s := m.Summary
	switch suffix {
	case "":
		s.Quantile = append(s.Quantile, &dto.Quantile{Quantile: d.float(bound), Value: d.float(v)})
	case "_sum":
		s.SampleSum = d.float(v)
	case "_count":
		s.SampleCount = d.count(v)
	}
}

// slab is how many buckets the decoder allocates at once.
const slab = 64

// bucket returns a histogram bucket of bound and cumulative count v, cut
// from the decoder's slabs.
func (d *textDecoder) bucket(bound, v float64) *dto.Bucket {
	if len(d.buckets) == cap(d.buckets) {
		d.buckets = make([]dto.Bucket, 0, slab)
	}
	d.buckets = d.buckets[:len(d.buckets)+1]
	b := &d.buckets[len(d.buckets)-1]
	b.UpperBound, b.CumulativeCount = d.float(bound), d.count(v)
	return b
}

// float returns a pointer to v, cut from the decoder's slab.
func (d *textDecoder) float(v float64) *float64 {
	if len(d.floats) == cap(d.floats) {
		d.floats = make([]float64, 0, slab)
	}
	d.floats = append(d.floats, v)
	return &d.floats[len(d.floats)-1]
}

// count returns a pointer to the count v as client_model holds it (u64),
// cut from the decoder's slab.
func (d *textDecoder) count(v float64) *uint64 {
	if len(d.counts) == cap(d.counts) {
		d.counts = make([]uint64, 0, slab)
	}
	d.counts = append(d.counts, u64(v))
	return &d.counts[len(d.counts)-1]
}

// aggregateMetric is the metric of mf whose labels are pairs, created at
// the first sample of that label set. A family's series are few (one per
// model and engine), and their samples come in a row.
func (d *textDecoder) aggregateMetric(mf *dto.MetricFamily, pairs []*dto.LabelPair) *dto.Metric {
	for i := len(mf.Metric) - 1; i >= 0; i-- {
		if samePairs(mf.Metric[i].Label, pairs) {
			return mf.Metric[i]
		}
	}
	m := &dto.Metric{Label: pairs}
	if mf.GetType() == dto.MetricType_HISTOGRAM {
		m.Histogram = &dto.Histogram{}
	} else {
		m.Summary = &dto.Summary{}
	}
	mf.Metric = append(mf.Metric, m)
	return m
}

// sameLabels reports whether pairs are the labels of ls but the metric name
// and skip.
func sameLabels(pairs []*dto.LabelPair, ls labels.Labels, skip string) bool {
	i, same := 0, true
	ls.Range(func(l labels.Label) {
		if !same || l.Name == model.MetricNameLabel || l.Name == skip {
			return
		}
		if i >= len(pairs) || pairs[i].GetName() != l.Name || pairs[i].GetValue() != l.Value {
			same = false
		}
		i++
	})
	return same && i == len(pairs)
}

// labelPairs are the label pairs of ls but the metric name and skip.
func labelPairs(ls labels.Labels, skip string) []*dto.LabelPair {
	n := 0
	ls.Range(func(l labels.Label) {
		if l.Name != model.MetricNameLabel && l.Name != skip {
			n++
		}
	})
	// One allocation each for the pairs, their pointers and their strings.
	pairs := make([]dto.LabelPair, n)
	out := make([]*dto.LabelPair, n)
	strs := make([]string, 2*n)
	i := 0
	ls.Range(func(l labels.Label) {
		if l.Name != model.MetricNameLabel && l.Name != skip {
			strs[2*i], strs[2*i+1] = l.Name, l.Value
			pairs[i].Name, pairs[i].Value = &strs[2*i], &strs[2*i+1]
			out[i] = &pairs[i]
			i++
		}
	})
	return out
}

// samePairs reports whether a and b hold the same labels in the same order.
func samePairs(a, b []*dto.LabelPair) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && (a[i].GetName() != b[i].GetName() || a[i].GetValue() != b[i].GetValue()) {
			return false
		}
	}
	return true
}

// metricName is the name a series' bytes start with; nil when the name is
// quoted inside the braces.
func metricName(series []byte) []byte {
	if i := bytes.IndexByte(series, '{'); i >= 0 {
		series = series[:i]
	}
	series = bytes.TrimRight(series, " \t")
	if len(series) == 0 {
		return nil
	}
	return series
}

func dtoType(t model.MetricType) *dto.MetricType {
	typ := dto.MetricType_UNTYPED
	switch t {
	case model.MetricTypeCounter:
		typ = dto.MetricType_COUNTER
	case model.MetricTypeGauge:
		typ = dto.MetricType_GAUGE
	case model.MetricTypeHistogram:
		typ = dto.MetricType_HISTOGRAM
	case model.MetricTypeSummary:
		typ = dto.MetricType_SUMMARY
	}
	return &typ
}

// u64 is a count as client_model holds it; expfmt's text parser truncates
// the same way. A negative or NaN count is 0.
func u64(v float64) uint64 {
	if v > 0 && !math.IsNaN(v) {
		return uint64(v)
	}
	return 0
}
