package prober

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// DefaultHistoryLimit is how many recent results each (target, module) pair keeps
// for the landing page; as many recent failures are kept on top of them, so a
// failure stays visible long after successes pushed it out of the recent ring.
// It is also the default of vllm_prober's --history.limit.
const DefaultHistoryLimit = 20

// history is a bounded record of a pair's results, in the manner of
// blackbox_exporter's ResultHistory. It is not safe for concurrent use (the
// Manager guards it).
type history struct {
	limit    int
	recent   []*kept // oldest first, at most limit
	failures []*kept // oldest first, at most limit
}

// Record is a result a pair's history keeps, with its id.
type Record struct {
	// ID identifies the record among the results of its (target, module):
	// the Manager numbers them from 1 as it records them (Manager.Record).
	ID uint64
	probe.Result
}

// kept is a result the history keeps: its headers are packed into one
// string, because two http.Header maps cost ~10 times their text and the
// history holds --history.limit results (plus failures) for every (target,
// module) pair.
type kept struct {
	id      uint64
	res     probe.Result // without its headers
	headers string       // both headers (packHeaders)
}

// add keeps a copy of r as record id.
func (h *history) add(id uint64, r *probe.Result) {
	k := &kept{id: id, res: *r, headers: packHeaders(r.RequestHeader, r.ResponseHeader)}
	k.res.RequestHeader, k.res.ResponseHeader = nil, nil
	if len(k.res.ITLs) > MaxRecordITLs {
		k.res.ITLs = slices.Clone(k.res.ITLs[:MaxRecordITLs])
	}
	h.recent = appendBounded(h.recent, k, h.limit)
	if !k.res.Success {
		h.failures = appendBounded(h.failures, k, h.limit)
	}
}

func appendBounded(s []*kept, r *kept, limit int) []*kept {
	if limit < 1 {
		limit = 1
	}
	s = append(s, r)
	if len(s) > limit {
		s = slices.Delete(s, 0, len(s)-limit)
	}
	return s
}

// last returns a copy of the newest result, headers included; false if none.
func (h *history) last() (Record, bool) {
	if len(h.recent) == 0 {
		return Record{}, false
	}
	return h.recent[len(h.recent)-1].unpacked(), true
}

// list returns copies of the kept results, newest first, each once.
func (h *history) list() []Record {
	seen := make(map[*kept]bool, len(h.recent))
	all := make([]*kept, 0, len(h.recent)+len(h.failures))
	for _, s := range [][]*kept{h.recent, h.failures} {
		for _, r := range s {
			if !seen[r] {
				seen[r] = true
				all = append(all, r)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *kept) int { return b.res.Start.Compare(a.res.Start) })
	out := make([]Record, len(all))
	for i, r := range all {
		out[i] = r.unpacked()
	}
	return out
}

// unpacked returns a copy of a kept result with its headers restored.
func (k *kept) unpacked() Record {
	c := Record{ID: k.id, Result: k.res}
	c.RequestHeader, c.ResponseHeader = unpackHeaders(k.headers)
	return c
}

// A record keeps at most MaxRecordHeaders header lines of each of its
// request and response, each value cut to MaxRecordHeaderValueBytes (at a
// UTF-8 boundary, marked by recordCutMark): a target's headers, up to
// httpclient.MaxResponseHeaderBytes, are kept in every record of its pairs'
// histories, and only what a reader needs of them is worth keeping.
const (
	MaxRecordHeaders          = 48
	MaxRecordHeaderValueBytes = 512
	// MaxRecordITLs bounds the inter-token gaps a record keeps (its report
	// reads their minimum, maximum and mean): a probe's own result keeps up
	// to probe.MaxITLs, which every record of --history.limit would hold.
	MaxRecordITLs = 1024
)

// recordCutMark ends a header value the record cut, and names the header
// line that counts the ones it left out.
const (
	recordCutMark      = " …[cut]"
	recordOmittedName  = "X-Vllm-Prober-Omitted"
	recordOmittedValue = " more header lines not kept"
)

// cutValue returns v cut to MaxRecordHeaderValueBytes at a UTF-8 boundary,
// marked.
func cutValue(v string) string {
	if len(v) <= MaxRecordHeaderValueBytes {
		return v
	}
	n := MaxRecordHeaderValueBytes
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n] + recordCutMark
}

// packHeaders writes request and response headers as "Key: value" lines (a
// header with several values gives several lines, in order), the two parts
// separated by a NUL byte. Header names hold no ':' and values no newline or
// NUL (net/http rejects them; should a server's value hold one anyway, it is
// kept as U+FFFD), so the text is unambiguous; nil and empty headers both pack
// to an empty part. Each part keeps the first MaxRecordHeaders lines in name
// order, each value cut to MaxRecordHeaderValueBytes, and a last line
// counting the lines it left out.
func packHeaders(req, resp http.Header) string {
	var parts [2][]string
	n := 1
	for i, h := range [2]http.Header{req, resp} {
		keys := make([]string, 0, len(h))
		for k := range h {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		omitted := 0
		for _, k := range keys {
			for _, v := range h[k] {
				if len(parts[i]) == MaxRecordHeaders {
					omitted++
					continue
				}
				line := k + ": " + headerValueReplacer.Replace(cutValue(v)) + "\n"
				parts[i] = append(parts[i], line)
				n += len(line)
			}
		}
		if omitted > 0 {
			line := recordOmittedName + ": " + strconv.Itoa(omitted) + recordOmittedValue + "\n"
			parts[i] = append(parts[i], line)
			n += len(line)
		}
	}
	var b strings.Builder
	b.Grow(n) // exact, so that the history holds no spare capacity
	for i, lines := range parts {
		if i == 1 {
			b.WriteByte(0)
		}
		for _, l := range lines {
			b.WriteString(l)
		}
	}
	return b.String()
}

var headerValueReplacer = strings.NewReplacer("\n", "\uFFFD", "\x00", "\uFFFD")

func unpackHeaders(s string) (req, resp http.Header) {
	if s == "" {
		return nil, nil
	}
	reqPart, respPart, _ := strings.Cut(s, "\x00")
	return unpackHeader(reqPart), unpackHeader(respPart)
}

func unpackHeader(s string) http.Header {
	if s == "" {
		return nil
	}
	h := http.Header{}
	for line := range strings.Lines(s) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		h[k] = append(h[k], v)
	}
	return h
}

// find returns a copy of the kept result with the given id, headers included.
func (h *history) find(id uint64) (Record, bool) {
	for _, s := range [][]*kept{h.recent, h.failures} {
		for _, r := range s {
			if r.id == id {
				return r.unpacked(), true
			}
		}
	}
	return Record{}, false
}
