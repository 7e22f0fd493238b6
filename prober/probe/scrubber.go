package probe

import (
	"net/http"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// Scrubber removes configured secrets (credentials, and the tokens the HTTP
// clients obtained) from what a target sends, before a Result keeps any of
// it. vllm_prober's redactor is one; a nil Scrubber scrubs nothing.
type Scrubber interface {
	// String returns s without its secrets.
	String(s string) string
	// Cut scrubs s, then cuts it to at most n bytes, so that no part of a
	// secret straddling the cut survives.
	Cut(s string, n int) string
	// ScrubTail scrubs s, and the start of a secret its end may hold.
	ScrubTail(s string) string
	// MaxLen is the length of the longest secret, in bytes.
	MaxLen() int
	// Label returns s, or a placeholder when s held a secret (held true).
	Label(s string) (v string, held bool)
	// Header scrubs h in place.
	Header(h http.Header)
}

// scrubberOr is s, or one that scrubs nothing when s is nil.
func scrubberOr(s Scrubber) Scrubber {
	if s == nil {
		return (*redact.Redactor)(nil) // a nil Redactor scrubs nothing
	}
	return s
}
