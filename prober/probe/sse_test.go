package probe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAllEvents(r io.Reader) ([]string, error) {
	s := newSSEReader(r)
	var out []string
	for {
		d, err := s.next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(d))
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr error
	}{
		{name: "vllm", in: "data: {\"a\":1}\n\ndata: [DONE]\n\n", want: []string{`{"a":1}`, "[DONE]"}},
		{name: "crlf", in: "data: x\r\n\r\ndata: y\r\n\r\n", want: []string{"x", "y"}},
		{name: "no space after colon", in: "data:x\n\n", want: []string{"x"}},
		{name: "only one space stripped", in: "data:  x\n\n", want: []string{" x"}},
		{name: "comments and pings skipped", in: ": ping\n\n:\ndata: x\n: mid\n\n", want: []string{"x"}},
		{name: "other fields ignored", in: "event: message\nid: 7\nretry: 10\ndata: x\n\n", want: []string{"x"}},
		{name: "multi-line data joined", in: "data: a\ndata: b\n\n", want: []string{"a\nb"}},
		{name: "blank events skipped", in: "\n\n\ndata: x\n\n", want: []string{"x"}},
		{name: "field without colon", in: "data\n\n", want: []string{""}},
		{name: "empty stream", in: "", want: nil},
		{name: "ends inside event", in: "data: x\n", wantErr: io.ErrUnexpectedEOF},
		{name: "ends inside line", in: "data: x", wantErr: io.ErrUnexpectedEOF},
		{name: "huge line", in: "data: " + strings.Repeat("x", maxSSELine+1) + "\n\n", wantErr: errLineTooLong},
		{name: "huge event from many lines", in: strings.Repeat("data: "+strings.Repeat("x", 1000)+"\n", 1100) + "\n", wantErr: errEventTooLong},
		{name: "line at the limit", in: "data: " + strings.Repeat("x", maxSSELine-6) + "\n\n", want: []string{strings.Repeat("x", maxSSELine-6)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAllEvents(strings.NewReader(tc.in))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events %q, want %q", len(got), trunc(got), tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %d = %q, want %q", i, trunc(got[i:i+1]), tc.want[i])
				}
			}
		})
	}
}

func trunc(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		out[i] = v
	}
	return out
}

// oneByteReader delivers one byte per Read, the worst case for line assembly.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func TestSSEReaderByteAtATime(t *testing.T) {
	in := "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\n: ping\n\ndata: [DONE]\n\n"
	got, err := readAllEvents(oneByteReader{strings.NewReader(in)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"choices":[{"text":"a"}]}`, "[DONE]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// FuzzSSE checks that the reader never panics, never returns more than its
// limits, and agrees with a naive reference parser on inputs within them.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"data: x\r\n\r\n",
		": ping\n\ndata:x\ndata: y\n\n",
		"event: e\nid: 1\ndata\n\n",
		"data: x",
		"\n\n\n",
		"data: \xff\xfe\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := newSSEReader(bytes.NewReader(in))
		s.maxLine, s.maxData = 64, 128 // small limits so the fuzzer reaches them
		var got []string
		var err error
		for {
			var d []byte
			d, err = s.next()
			if err != nil {
				break
			}
			if len(d) > s.maxData {
				t.Fatalf("event of %d bytes exceeds the limit %d", len(d), s.maxData)
			}
			got = append(got, string(d))
		}
		if err != io.EOF {
			return // errors are fine; only their absence is checked below
		}
		want := referenceSSE(string(in))
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("got %q, reference %q", got, want)
		}
	})
}

// referenceSSE is a naive SSE data parser (\n and \r\n line ends only).
func referenceSSE(in string) []string {
	var out []string
	var data []string
	has := false
	for _, line := range strings.SplitAfter(in, "\n") {
		if !strings.HasSuffix(line, "\n") {
			break // unterminated last line: the real reader reports an error
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if has {
				out = append(out, strings.Join(data, "\n"))
			}
			data, has = nil, false
		case strings.HasPrefix(line, ":"):
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			if name == "data" {
				data = append(data, value)
				has = true
			}
		}
	}
	return out
}
