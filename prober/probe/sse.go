package probe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Limits of the SSE reader. A vLLM event is a few hundred bytes (more with
// logprobs); anything near these sizes is a broken or hostile server, and reading
// it must not allocate without bound.
const (
	maxSSELine  = 1 << 20 // one line
	maxSSEEvent = 1 << 20 // the data of one event (all its data: lines)
)

var (
	errLineTooLong  = errors.New("SSE line exceeds 1 MiB")
	errEventTooLong = errors.New("SSE event exceeds 1 MiB")
)

// sseReader reads Server-Sent Events (https://html.spec.whatwg.org/multipage/server-sent-events.html)
// with hard size limits. Only the data field matters to us: event, id and retry
// fields and comment lines (":" — vLLM and proxies use them as keep-alive pings)
// are skipped.
type sseReader struct {
	r       *bufio.Reader
	maxLine int
	maxData int
	line    []byte // reused line buffer
	data    []byte // reused event buffer
}

// sseBuffer is the reader's buffer: an event is a few hundred bytes, and a
// longer line is read in fragments (readLine), so 4 KiB, net/http's own
// buffer size, costs a probe an eighth of what 32 KiB did.
const sseBuffer = 4 << 10

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, sseBuffer), maxLine: maxSSELine, maxData: maxSSEEvent}
}

// readLine returns the next line without its terminator (\n or \r\n). A lone \r,
// which the SSE grammar also allows as a terminator, is not treated as one: no
// vLLM version emits it, and a raw \r cannot occur in the JSON payload, so such a
// stream fails as malformed when its JSON is parsed. The slice is valid until the
// next call. At EOF it returns any partial line with io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		frag, err := s.r.ReadSlice('\n')
		if len(s.line)+len(frag) > s.maxLine+2 { // +2: the terminator is not content
			return nil, errLineTooLong
		}
		s.line = append(s.line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return s.line, err
		}
		line := s.line[:len(s.line)-1]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) > s.maxLine {
			return nil, errLineTooLong
		}
		return line, nil
	}
}

// next returns the data of the next event that has any (data lines joined by
// "\n", per the SSE spec). The slice is valid until the next call. At a clean end
// of stream it returns io.EOF; a stream that ends inside an event returns
// io.ErrUnexpectedEOF (vLLM always terminates events with a blank line).
func (s *sseReader) next() ([]byte, error) {
	s.data = s.data[:0]
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil && err != io.EOF {
			return nil, err
		}
		if err == io.EOF {
			if len(line) == 0 && !hasData {
				return nil, io.EOF
			}
			return nil, io.ErrUnexpectedEOF
		}
		done, err := s.field(line, &hasData)
		if err != nil {
			return nil, err
		}
		if done && hasData {
			return s.data, nil
		}
	}
}

// field handles one line. It reports whether the line was blank (an event boundary).
func (s *sseReader) field(line []byte, hasData *bool) (bool, error) {
	if len(line) == 0 {
		return true, nil
	}
	if line[0] == ':' {
		return false, nil // comment / keep-alive ping
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte{' '})
	}
	if string(name) != "data" {
		return false, nil // event:, id:, retry: and unknown fields
	}
	if *hasData {
		if len(s.data)+1 > s.maxData {
			return false, errEventTooLong
		}
		s.data = append(s.data, '\n')
	}
	if len(s.data)+len(value) > s.maxData {
		return false, errEventTooLong
	}
	s.data = append(s.data, value...)
	*hasData = true
	return false, nil
}
