package web

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// TestHeaderLines: a header as the debug report shows it, sorted, the
// sensitive headers' values and the configured secrets in the others
// replaced.
func TestHeaderLines(t *testing.T) {
	s := &scrubber{red: redact.New("sk-bearer-7777")}
	h := http.Header{
		"Authorization":  {"Bearer whatever"},
		"X-Api-Key":      {"k"},
		"X-Echo":         {"got sk-bearer-7777"},
		"X-Request-Id":   {"r1"},
		"Content-Length": {"3"},
	}
	wantLines := []string{
		"Authorization: <secret>",
		"Content-Length: 3",
		"X-Api-Key: <secret>",
		"X-Echo: got <secret>",
		"X-Request-Id: r1",
	}
	if got := s.headerLines(h); !reflect.DeepEqual(got, wantLines) {
		t.Errorf("headerLines = %q, want %q", got, wantLines)
	}
}
