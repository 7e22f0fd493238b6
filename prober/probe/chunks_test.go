package probe

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzCaptureOnce: what the capture and the excerpt take from an event the
// decoder just read (without decoding it again) is what decoding the event
// for them alone gives.
func FuzzCaptureOnce(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"text":" Paris","finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":"caf\u00e9 \"quoted\"\n\ud83d\ude00"}}]}`,
		`{"choices":[{"delta":{"reasoning_content":"think","content":null}}]}`,
		`{"choices":[{"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"get_weather","arguments":"{\"ci"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": 1}"}}]}},{"text":"x"}]}`,
		`{"choices":[{"delta":{"tool_calls":{"index":0}}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
		`{"error":{"message":"boom","code":500}}`,
		`[DONE]`,
		// Unquoted as encoding/json does: a lone surrogate, invalid UTF-8.
		`{"choices":[{"text":"a\ud800b\udc00","delta":{"content":"\u00e9\/\b\f\t\r"}}]}`,
		"{\"choices\":[{\"text\":\"x\xffy\xc3\"}]}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		d := &chunkDecoder{}
		buf := []byte(data)
		if _, err := d.decode(buf); err != nil {
			return
		}
		once, twice := &generated{unbounded: true}, &generated{unbounded: true}
		d.capture(once, buf)
		twice.add(buf)
		var onceText, twiceText strings.Builder
		d.text(&onceText, buf)
		(&chunkDecoder{}).text(&twiceText, buf) // not decoded: decodes for itself
		if strings.TrimSpace(data) == "[DONE]" {
			return
		}
		// A tool_calls that is not an array of calls fails the old capture
		// as a whole; the new one still keeps the event's text.
		if want := twice.text.String(); want != "" && once.text.String() != want {
			t.Errorf("capture text %q, decoding again gives %q", once.text.String(), want)
		}
		if len(once.calls) != len(twice.calls) && len(twice.calls) > 0 {
			t.Errorf("capture tool calls %+v, decoding again gives %+v", once.calls, twice.calls)
		}
		for i := range twice.calls {
			if i < len(once.calls) && (once.calls[i].id != twice.calls[i].id || once.calls[i].name != twice.calls[i].name || string(once.calls[i].args) != string(twice.calls[i].args)) {
				t.Errorf("tool call %d: %+v, decoding again gives %+v", i, once.calls[i], twice.calls[i])
			}
		}
		if onceText.String() != twiceText.String() {
			t.Errorf("excerpt %q, decoding again gives %q", onceText.String(), twiceText.String())
		}
	})
}

// FuzzChunkDecodeAsEncodingJSON: the chunk decoder (the json v2 prototype's
// decoder with encoding/json's semantics) accepts and refuses what
// encoding/json does, and finds the same fields in what it accepts.
func FuzzChunkDecodeAsEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"text":" Paris","finish_reason":null}]}`,
		`{"CHOICES":[{"Text":"case"}],"choices":[{"text":"last wins"}]}`,
		`{"choices":[{"text":"\xff invalid utf-8"}]}`,
		`{"choices":[{"text":1}]}`,
		`{"choices":[{"text":"a"}]} trailing`,
		`{"choices":[{"delta":{"content":"x","role":"assistant"}}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
		`{"choices":[],"timings":{"predicted_n":7}}`,
		`{"object":"error","message":"boom"}`,
		`{"choices":[{"finish_reason":"error"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if strings.TrimSpace(data) == "[DONE]" {
			return
		}
		var want chunk
		wantErr := json.Unmarshal([]byte(data), &want)
		d := &chunkDecoder{}
		_, err := d.decode([]byte(data))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decode error %v, encoding/json's %v", err, wantErr)
		}
		if err != nil {
			return
		}
		got := d.c
		if len(got.Choices) != len(want.Choices) || bool(got.Object) != bool(want.Object) || string(got.Error) != string(want.Error) ||
			(got.Usage == nil) != (want.Usage == nil) || (got.Usage != nil && *got.Usage != *want.Usage) ||
			(got.Timings == nil) != (want.Timings == nil) || (got.Timings != nil && *got.Timings != *want.Timings) {
			t.Fatalf("decoded %+v, encoding/json %+v", got, want)
		}
		for i, g := range got.Choices {
			w := want.Choices[i]
			if g.Text.String() != w.Text.String() || g.Delta.Content.String() != w.Delta.Content.String() ||
				g.Delta.Role.set != w.Delta.Role.set || g.Delta.ToolCalls.set != w.Delta.ToolCalls.set ||
				(g.FinishReason == nil) != (w.FinishReason == nil) || (g.FinishReason != nil && *g.FinishReason != *w.FinishReason) {
				t.Fatalf("choice %d: decoded %+v, encoding/json %+v", i, g, w)
			}
		}
	})
}
