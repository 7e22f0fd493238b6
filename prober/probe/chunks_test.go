package probe

import (
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
