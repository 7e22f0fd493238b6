package prober

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// TestRecordHeadersBounded: a target answering with hundreds of long
// headers (up to the 64 KiB the client accepts, values with multi-byte
// characters) leaves in each record of its history at most MaxRecordHeaders
// lines per part, each value cut to MaxRecordHeaderValueBytes at a rune
// boundary and marked, and a line counting the rest; ordinary headers are
// kept whole. Before the bound a record kept every byte of them.
func TestRecordHeadersBounded(t *testing.T) {
	resp := http.Header{"Content-Type": {"text/event-stream"}}
	for i := range 200 {
		resp.Set(fmt.Sprintf("X-Hostile-%03d", i), strings.Repeat("é", 2000)) // 4,000 bytes
	}
	req := http.Header{"Accept": {"text/event-stream"}, "X-Request-Id": {"vllm-prober-a-m-1"}}
	h := &history{limit: 5}
	h.add(1, &probe.Result{RequestHeader: req, ResponseHeader: resp})
	rec, ok := h.last()
	if !ok {
		t.Fatal("no record")
	}
	if rec.RequestHeader.Get("X-Request-Id") != "vllm-prober-a-m-1" || rec.RequestHeader.Get("Accept") != "text/event-stream" {
		t.Errorf("ordinary request headers not kept whole: %v", rec.RequestHeader)
	}
	lines, size := 0, 0
	for k, vs := range rec.ResponseHeader {
		for _, v := range vs {
			lines++
			size += len(k) + len(v)
			if !utf8.ValidString(v) {
				t.Errorf("%s: cut inside a rune", k)
			}
			if strings.HasPrefix(k, "X-Hostile-") && (len(v) > MaxRecordHeaderValueBytes+len(recordCutMark) || !strings.HasSuffix(v, recordCutMark)) {
				t.Errorf("%s: %d bytes kept, want at most %d and the cut marked", k, len(v), MaxRecordHeaderValueBytes)
			}
		}
	}
	if lines != MaxRecordHeaders+1 {
		t.Errorf("%d response header lines kept, want %d and the count of the rest", lines, MaxRecordHeaders+1)
	}
	if got, want := rec.ResponseHeader.Get(recordOmittedName), fmt.Sprint(201-MaxRecordHeaders)+recordOmittedValue; got != want {
		t.Errorf("%s = %q, want %q", recordOmittedName, got, want)
	}
	if limit := (MaxRecordHeaders + 1) * (MaxRecordHeaderValueBytes + 64); size > limit {
		t.Errorf("a record keeps %d bytes of response headers, want at most %d", size, limit)
	}
	t.Logf("200 headers of 4,000 bytes (800,000 bytes) kept as %d lines, %d bytes", lines, size)
}

// TestRecordITLsBounded: a record keeps the first MaxRecordITLs gaps of
// its probe, not the probe.MaxITLs its result may hold.
func TestRecordITLsBounded(t *testing.T) {
	h := &history{limit: 5}
	h.add(1, &probe.Result{ITLs: make([]time.Duration, probe.MaxITLs)})
	if rec, _ := h.last(); len(rec.ITLs) != MaxRecordITLs || cap(rec.ITLs) != MaxRecordITLs {
		t.Errorf("record keeps %d gaps (capacity %d), want %d", len(rec.ITLs), cap(rec.ITLs), MaxRecordITLs)
	}
}
