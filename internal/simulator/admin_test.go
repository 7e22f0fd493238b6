package simulator

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestAdminRoundTrip(t *testing.T) {
	_, ts := startSim(t, func(c *Config) { c.APIKey = "k" })
	code, body := get(t, ts.URL+"/admin/config")
	want := `{"model":"m","max_model_len":1024,"kv_cache_tokens":16384,"block_size":16,"data_parallel_size":1,` +
		`"engine":"vllm","metrics_names":"v1","error_shape":"nested","version":"0.32.0","trace_file":"","api_key_set":true,` +
		`"ttft":"5ms","itl":"2ms","prefill_per_token":"0s","batch_slowdown":0,"jitter":0,"max_num_seqs":256,` +
		`"fault":"","fault_rate":1,"fault_status":500,"fault_after":1,"fault_delay":"5s","kv_transfer_delay":"5ms"}`
	if code != 200 || body != want {
		t.Fatalf("GET /admin/config = %d\n got: %s\nwant: %s", code, body, want)
	}
	code, body = admin(t, ts.URL, `{"ttft":"20ms","itl":"1.5ms","batch_slowdown":0.1,"max_num_seqs":8,"fault":"stall","fault_rate":0.25,"fault_status":503,"fault_after":3,"fault_delay":"1s","prefill_per_token":"10us","jitter":0.1}`)
	if code != 200 {
		t.Fatalf("POST = %d %s", code, body)
	}
	var v adminView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.TTFT != "20ms" || v.ITL != "1.5ms" || v.BatchSlowdown != 0.1 || v.MaxNumSeqs != 8 || v.Fault != "stall" ||
		v.FaultRate != 0.25 || v.FaultStatus != 503 || v.FaultAfter != 3 || v.FaultDelay != "1s" || v.PrefillPerToken != "10µs" || v.Jitter != 0.1 {
		t.Errorf("after POST: %s", body)
	}
	if _, again := get(t, ts.URL+"/admin/config"); again != body {
		t.Errorf("GET after POST differs:\n%s\n%s", again, body)
	}
	if code, body = admin(t, ts.URL, `{"fault":""}`); code != 200 {
		t.Fatalf("clear fault: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(get2(t, ts.URL+"/admin/config")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Fault != "" || v.TTFT != "20ms" {
		t.Errorf(`{"fault": ""} must clear only the fault: %s`, body)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"bogus":1}`, `{"error":"unknown key \"bogus\"; valid keys: ttft, itl, prefill_per_token, batch_slowdown, jitter, max_num_seqs, fault, fault_rate, fault_status, fault_after, fault_delay, kv_transfer_delay"}`},
		{`{"model":"x"}`, `{"error":"key \"model\" is read-only; set it with a command-line flag"}`},
		{`{"ttft":20}`, `{"error":"key \"ttft\": want a Go duration string such as \"20ms\": json: cannot unmarshal number into Go value of type string"}`},
		{`{"itl":"fast"}`, `{"error":"key \"itl\": want a Go duration string such as \"20ms\": time: invalid duration \"fast\""}`},
		{`{"fault":"meteor"}`, `{"error":"unknown fault \"meteor\"; valid faults: http_status, hang_before_headers, stall, cut_stream, malformed_chunk, error_event, huge_line, engine_dead, slow_metrics, metrics_reset, wrong_answer, broken_json, no_tool_call, zero_embedding, adapter_not_found"}`},
		{`{"fault_rate":1.5}`, `{"error":"fault_rate must be in [0, 1], got 1.5"}`},
		{`{"max_num_seqs":0,"ttft":"1s"}`, `{"error":"max_num_seqs must be at least 1, got 0"}`},
		{`[1]`, `{"error":"body must be a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"}`},
	} {
		code, got := admin(t, ts.URL, tc.body)
		if code != 400 || got != tc.want {
			t.Errorf("POST %s = %d %s\nwant 400 %s", tc.body, code, got, tc.want)
		}
	}
	// A rejected update changes nothing.
	if err := json.Unmarshal([]byte(get2(t, ts.URL+"/admin/config")), &v); err != nil {
		t.Fatal(err)
	}
	if v.TTFT != "20ms" || v.MaxNumSeqs != 8 {
		t.Errorf("rejected POST changed the config: %+v", v)
	}
}

func get2(t *testing.T, url string) string {
	_, b := get(t, url)
	return b
}

// TestAdminChangesLatency checks that a POSTed ITL applies to new requests.
func TestAdminChangesLatency(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	_, ts := startSim(t, func(c *Config) { c.TraceFile = trace; c.TTFT = time.Millisecond; c.ITL = time.Millisecond })
	setFault(t, ts.URL, `{"itl":"15ms"}`)
	sent := time.Now()
	streamCompletion(t, ts.URL, `{"prompt":"x","max_tokens":5,"ignore_eos":true,"stream":true}`, "X-Request-Id", "slow")
	lines := readTrace(t, trace)
	if len(lines) != 5 {
		t.Fatalf("trace has %d lines, want 5 tokens", len(lines))
	}
	// The simulator paces tokens on deadlines counted from the request (no
	// drift), so a late first token is followed by shorter gaps: the gap from
	// the first to the last token is no bound. The last token's deadline is:
	// it comes at least TTFT + 4 ITLs after the request was sent, whatever the
	// machine's load (sleeps only overshoot). With the old 1ms ITL it would
	// come about 5ms after.
	last := time.Unix(0, lines[len(lines)-1].TimeUnixNano)
	if took, want := last.Sub(sent), time.Millisecond+4*15*time.Millisecond; took < want {
		t.Errorf("the 5th token came %s after the request, want at least %s (TTFT 1ms + 4 × ITL 15ms)", took, want)
	}
}

type traceLine struct {
	RequestID    string `json:"request_id"`
	Event        int    `json:"event"`
	Kind         string `json:"kind"`
	Token        int    `json:"token"`
	TimeUnixNano int64  `json:"time_unix_nano"`
}

func readTrace(t *testing.T, path string) []traceLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []traceLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l traceLine
		dec := json.NewDecoder(bytesReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// TestTraceAndTiming: an idle simulator serves TTFT = ttft + prefill and
// ITL = itl; the trace holds every event with flush timestamps.
func TestTraceAndTiming(t *testing.T) {
	// The structure of the trace is checked on every attempt; its timing may be
	// late by however much the machine delays a goroutine (go test runs many
	// packages at once under -race). Deadline scheduling means the simulator is
	// never early and adds no delay of its own, so the best of three attempts
	// must meet the bounds: a simulator that added delay would miss them in all
	// three, while a loaded machine rarely delays three runs in a row.
	var problems []string
	for attempt := 1; attempt <= 3; attempt++ {
		if problems = traceAndTiming(t); len(problems) == 0 {
			return
		}
		t.Logf("attempt %d: %s", attempt, strings.Join(problems, "; "))
	}
	t.Errorf("timing off in three attempts; the last: %s", strings.Join(problems, "; "))
}

// traceAndTiming runs one traced request, fails t on a structural error or an
// early token, and returns the timing bounds it missed.
func traceAndTiming(t *testing.T) (problems []string) {
	t.Helper()
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	const ttft, itl, prefill = 40 * time.Millisecond, 10 * time.Millisecond, 100 * time.Microsecond
	_, ts := startSim(t, func(c *Config) {
		c.TraceFile = trace
		c.TTFT, c.ITL, c.PrefillPerToken = ttft, itl, prefill
		c.BatchSlowdown = 0.5 // no effect with a batch of one
	})
	const T = 20
	start := time.Now()
	resp := post(t, ts.URL+"/v1/chat/completions",
		`{"messages":[{"role":"user","content":"`+string(make40())+`"}],"max_tokens":20,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
		"X-Request-Id", `id-"quoted"`)
	res := readSSE(t, resp.Body)
	resp.Body.Close()
	if len(res.events) != T+2 {
		t.Fatalf("%d events", len(res.events))
	}
	// The trace is on disk before [DONE] reaches the client.
	lines := readTrace(t, trace)
	if len(lines) != T+2 {
		t.Fatalf("trace has %d lines, want %d", len(lines), T+2)
	}
	kinds := map[string]int{}
	for i, l := range lines {
		if l.RequestID != `id-"quoted"` || l.Event != i {
			t.Errorf("line %d: %+v", i, l)
		}
		if i > 0 && l.TimeUnixNano < lines[i-1].TimeUnixNano {
			t.Errorf("line %d goes back in time", i)
		}
		kinds[l.Kind]++
	}
	if kinds["role"] != 1 || kinds["token"] != T || kinds["usage"] != 1 || lines[T].Token != T {
		t.Errorf("trace kinds %v", kinds)
	}
	// 40 bytes -> 10 prompt tokens -> 1ms prefill. Never early; late only by
	// the machine's scheduling.
	wantTTFT := ttft + 10*prefill
	gotTTFT := time.Duration(lines[1].TimeUnixNano - start.UnixNano())
	if gotTTFT < wantTTFT {
		t.Errorf("TTFT = %s, earlier than %s", gotTTFT, wantTTFT)
	}
	if gotTTFT > wantTTFT+20*time.Millisecond {
		problems = append(problems, fmt.Sprintf("TTFT = %s, want %s (+ scheduling noise)", gotTTFT, wantTTFT))
	}
	// Deadline scheduling: the span of T-1 gaps is exactly (T-1)*itl
	// plus the lateness of the last token minus that of the first.
	span := time.Duration(lines[T].TimeUnixNano - lines[1].TimeUnixNano)
	if want := (T - 1) * itl; span < want-10*time.Millisecond || span > want+20*time.Millisecond {
		problems = append(problems, fmt.Sprintf("ITL span = %s, want %s", span, want))
	}
	var gaps []time.Duration
	for i := 2; i <= T; i++ {
		gaps = append(gaps, time.Duration(lines[i].TimeUnixNano-lines[i-1].TimeUnixNano))
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	if med := gaps[len(gaps)/2]; med < itl-3*time.Millisecond || med > itl+3*time.Millisecond {
		problems = append(problems, fmt.Sprintf("median ITL = %s, want %s", med, itl))
	}
	return problems
}

func make40() []byte {
	b := make([]byte, 40)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// TestJitter: with jitter j every gap lies in [itl(1-j), itl(1+j)] (plus
// wake-up lateness) and the gaps are not all equal.
func TestJitter(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	const itl = 10 * time.Millisecond
	_, ts := startSim(t, func(c *Config) { c.TraceFile = trace; c.ITL = itl; c.Jitter = 0.5; c.TTFT = time.Millisecond })
	const T = 15
	streamCompletion(t, ts.URL, `{"prompt":"j","max_tokens":15,"ignore_eos":true,"stream":true}`)
	lines := readTrace(t, trace)
	if len(lines) != T {
		t.Fatalf("%d trace lines", len(lines))
	}
	span := time.Duration(lines[T-1].TimeUnixNano - lines[0].TimeUnixNano)
	if span < (T-1)*itl/2 || span > (T-1)*itl*3/2+20*time.Millisecond {
		t.Errorf("span of %d gaps = %s outside the jitter range", T-1, span)
	}
	distinct := map[time.Duration]bool{}
	for i := 1; i < T; i++ {
		distinct[time.Duration(lines[i].TimeUnixNano-lines[i-1].TimeUnixNano)/time.Millisecond] = true
	}
	if len(distinct) < 3 {
		t.Errorf("jittered gaps look constant: %v", distinct)
	}
}
