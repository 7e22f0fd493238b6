package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clientFloor is the least any client could add on this machine against
// this simulator: not a benchmark client but a measuring stick. Each of the
// C slots owns one TCP connection, dialled and warmed (one untimed request)
// before the timed window; every request is serialised beforehand; the first
// wave is released at once; a request's TTFT runs from just before its bytes
// are written to the moment the line of its first token is read. There is
// no JSON decoding, no timer and no HTTP client between the socket and the
// clock: only net/http's response parser and a read buffer per response. It runs inside this program (a
// warm process), so its figure also leaves out a cold start: what remains is
// the time the machine's cores and the simulator need to take C requests in
// at once and to hand their first tokens back.
const clientFloor = "floor (raw sockets)"

// floorRequest serialises one streaming completion request, the shape bench
// sends: a prompt of inputLen words, tokens output tokens, ignore_eos.
func floorRequest(host, model, id string, inputLen, tokens int) ([]byte, error) {
	body, err := json.Marshal(map[string]any{
		"model": model, "prompt": strings.TrimSpace(strings.Repeat("hello ", inputLen)),
		"max_tokens": tokens, "stream": true, "ignore_eos": true, "temperature": 0,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding a request: %w", err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+host+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building a request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Request-Id", id)
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		return nil, fmt.Errorf("serialising a request: %w", err)
	}
	return b.Bytes(), nil
}

// floorConn is one slot's connection.
type floorConn struct {
	c  net.Conn
	rd *bufio.Reader
}

// exchange writes req and reads its response to the end. It returns the
// time from the write to the first content event's line (zero when the
// stream had none) and the moment of the write.
func (fc *floorConn) exchange(req []byte) (sent time.Time, ttft time.Duration, err error) {
	sent = time.Now()
	if _, err := fc.c.Write(req); err != nil {
		return sent, 0, fmt.Errorf("writing a request: %w", err)
	}
	resp, err := http.ReadResponse(fc.rd, nil)
	if err != nil {
		return sent, 0, fmt.Errorf("reading a response: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sent, 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	body := bufio.NewReader(resp.Body)
	for ttft == 0 {
		line, err := body.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: {")) {
			ttft = time.Since(sent)
			break
		}
		if err != nil {
			return sent, 0, fmt.Errorf("reading the stream: %w", err)
		}
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return sent, ttft, fmt.Errorf("reading the stream: %w", err)
	}
	return sent, ttft, nil
}

// runFloor sends n requests at concurrency c to the simulator at url (with
// model) over c warmed connections, the first c released at once, and
// returns them as clientRecords with ids "<benchName>-floor-<i>" (start
// times in seconds since the release).
func runFloor(ctx context.Context, url, model string, c, n, inputLen, tokens int) ([]clientRecord, error) {
	host := strings.TrimPrefix(url, "http://")
	var d net.Dialer
	conns := make([]*floorConn, c)
	defer func() {
		for _, fc := range conns {
			if fc != nil {
				fc.c.Close()
			}
		}
	}()
	for i := range conns {
		nc, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return nil, fmt.Errorf("dialling the simulator: %w", err)
		}
		conns[i] = &floorConn{c: nc, rd: bufio.NewReaderSize(nc, 32<<10)}
	}
	// The connections close when ctx ends, which unblocks every read.
	stop := context.AfterFunc(ctx, func() {
		for _, fc := range conns {
			fc.c.Close()
		}
	})
	defer stop()

	reqs := make([][]byte, n)
	for i := range reqs {
		var err error
		if reqs[i], err = floorRequest(host, model, fmt.Sprintf("%s-floor-%d", benchName, i), inputLen, tokens); err != nil {
			return nil, err
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for i, fc := range conns {
		warm, err := floorRequest(host, model, fmt.Sprintf("%s-floor-warmup-%d", benchName, i), inputLen, 1)
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			if _, _, err := fc.exchange(warm); err != nil {
				fail(fmt.Errorf("warm-up: %w", err))
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	recs := make([]clientRecord, n)
	release := make(chan struct{})
	var next atomic.Int64
	var origin time.Time
	for _, fc := range conns {
		wg.Go(func() {
			<-release
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				sent, ttft, err := fc.exchange(reqs[i])
				if err != nil {
					fail(fmt.Errorf("request %d: %w", i, err))
					return
				}
				recs[i] = clientRecord{ID: fmt.Sprintf("%s-floor-%d", benchName, i), TTFT: ttft.Seconds(),
					Success: ttft > 0, Start: sent.Sub(origin).Seconds()}
			}
		})
	}
	origin = time.Now()
	close(release)
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return recs, nil
}
