package web

import (
	"net/http"
	"sort"
)

// scrubber is the pages' view of the daemon's redactor (the one owner of
// scrubbing, shared with the prober, the HTTP clients and the logger): every
// text the pages render goes through it.
type scrubber struct {
	red Scrubber
}

func (s *scrubber) scrub(text string) string {
	if s == nil {
		return text
	}
	return s.red.String(text)
}

// headerLines renders h sorted, one "Name: value" line each, with sensitive
// headers redacted and secrets scrubbed. h is not modified.
func (s *scrubber) headerLines(h http.Header) []string {
	h = h.Clone()
	s.red.Header(h)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lines []string
	for _, k := range keys {
		for _, v := range h[k] {
			lines = append(lines, k+": "+v)
		}
	}
	return lines
}
