package simtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CloseEach serves h on 127.0.0.1 as llama.cpp's llama-server (cpp-httplib)
// answers a streamed request: every response advertises
// `Connection: keep-alive` and `Keep-Alive: timeout=5, max=100`, and the
// server still closes the connection linger after the response's last byte,
// without reading whatever the client sent on it meanwhile. A client that
// reuses the pooled connection within linger writes its next request into
// a connection the server no longer reads: it gets EOF or a reset before
// any response byte. It returns the base URL and the count of POST
// requests (completions, chat, ...) the handler was given: a request sent
// into a closing connection never is.
// Everything stops when the test ends.
func CloseEach(t testing.TB, h http.Handler, linger time.Duration) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		served atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
	)
	t.Cleanup(func() {
		cancel()
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
				if err := serveOne(ctx, c, h, &served); err != nil {
					return
				}
				select {
				case <-time.After(linger):
				case <-ctx.Done():
				}
			})
		}
	})
	return "http://" + ln.Addr().String(), &served
}

// serveOne reads one request from c and writes h's answer to it, chunked.
func serveOne(ctx context.Context, c net.Conn, h http.Handler, served *atomic.Int64) error {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return fmt.Errorf("reading request: %w", err)
	}
	req.RemoteAddr = c.RemoteAddr().String()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if req.Method == http.MethodPost {
		served.Add(1)
	}
	w := &chunkedWriter{bw: bufio.NewWriter(c), header: http.Header{}}
	h.ServeHTTP(w, req.WithContext(rctx))
	return w.finish()
}

// chunkedWriter is the least of an HTTP/1.1 http.ResponseWriter: the
// header, then a chunked body flushed on demand.
type chunkedWriter struct {
	bw     *bufio.Writer
	header http.Header
	cw     interface {
		Write([]byte) (int, error)
		Close() error
	}
	err error
}

func (w *chunkedWriter) Header() http.Header { return w.header }

func (w *chunkedWriter) WriteHeader(code int) {
	if w.cw != nil {
		return
	}
	w.header.Del("Content-Length")
	w.header.Set("Transfer-Encoding", "chunked")
	w.header.Set("Connection", "keep-alive")
	w.header.Set("Keep-Alive", "timeout=5, max=100")
	_, _ = fmt.Fprintf(w.bw, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	w.err = errors.Join(w.err, w.header.Write(w.bw))
	_, _ = w.bw.WriteString("\r\n")
	w.cw = httputil.NewChunkedWriter(w.bw)
}

func (w *chunkedWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.cw.Write(b)
}

func (w *chunkedWriter) Flush() {
	w.WriteHeader(http.StatusOK)
	w.err = errors.Join(w.err, w.bw.Flush())
}

func (w *chunkedWriter) finish() error {
	w.WriteHeader(http.StatusOK)
	w.err = errors.Join(w.err, w.cw.Close())
	_, _ = w.bw.WriteString("\r\n")
	return errors.Join(w.err, w.bw.Flush())
}
