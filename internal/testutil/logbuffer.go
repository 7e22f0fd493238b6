// Package testutil holds helpers that the tests of several packages share.
// Only tests import it.
package testutil

import (
	"bytes"
	"sync"
)

// LogBuffer collects what a logger or a process writes while a test reads
// it: safe for concurrent writers and readers.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Take returns everything written since the last Take and empties the
// buffer.
func (b *LogBuffer) Take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}
