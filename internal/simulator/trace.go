package simulator

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// tracer writes one JSON line per streamed SSE event:
//
//	{"request_id":"r1","event":0,"kind":"token","token":1,"time_unix_nano":1788200000123456789}
//
// The buffer is flushed to the file before a stream sends its final
// "data: [DONE]", so a client that saw [DONE] finds its events on disk.
type tracer struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error
}

func newTracer(path string) (*tracer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening trace file: %w", err)
	}
	return &tracer{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

// record appends one line; quotedID is the JSON string literal of the id.
func (t *tracer) record(quotedID []byte, event int, kind string, token int, unixNano int64) {
	var buf [160]byte
	b := append(buf[:0], `{"request_id":`...)
	b = append(b, quotedID...)
	b = append(b, `,"event":`...)
	b = strconv.AppendInt(b, int64(event), 10)
	b = append(b, `,"kind":"`...)
	b = append(b, kind...)
	b = append(b, `","token":`...)
	b = strconv.AppendInt(b, int64(token), 10)
	b = append(b, `,"time_unix_nano":`...)
	b = strconv.AppendInt(b, unixNano, 10)
	b = append(b, "}\n"...)
	t.mu.Lock()
	if _, err := t.w.Write(b); err != nil && t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func (t *tracer) flush() {
	t.mu.Lock()
	if err := t.w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func (t *tracer) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	if err := t.f.Close(); err != nil && t.err == nil {
		t.err = err
	}
	if t.err != nil {
		return fmt.Errorf("writing trace file: %w", t.err)
	}
	return nil
}
