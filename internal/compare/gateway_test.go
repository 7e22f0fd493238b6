package compare

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/prober"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// sseBackend streams a two-token completion whose first token comes after ttft.
func sseBackend(t *testing.T, ttft time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		select {
		case <-time.After(ttft):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"text":"Hello","finish_reason":null}]}`+"\n\n")
		_ = http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"text":" world","finish_reason":"length"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestJoinGatewayHAProxy: a real HAProxy (round robin, `option http-no-delay`,
// each response naming its server in x-served-by) in front of three streaming
// backends, one with twice the others' time to first token. Probes through
// the gateway and to each member directly are joined: the spread names the
// slow member, each member served about a third, and the gateway's overhead
// is below the slow member's excess, so the slow first tokens are
// attributed to the member and not to the gateway.
func TestJoinGatewayHAProxy(t *testing.T) {
	const base = 80 * time.Millisecond
	backends := map[string]*httptest.Server{
		"b1": sseBackend(t, base), "b2": sseBackend(t, base), "b3": sseBackend(t, 2*base),
	}
	var servers []string
	for _, name := range []string{"b1", "b2", "b3"} {
		servers = append(servers, name+" "+backends[name].Listener.Addr().String())
	}
	port := testtool.HAProxyBalancer(t, servers, "", "")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	run := func(url string) probe.Result {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return probe.Stream(ctx, client, probe.StreamRequest{
			BaseURL: url, Kind: config.ProberCompletions,
			Body: map[string]any{"model": "m", "prompt": "p", "max_tokens": 2},
		})
	}
	var gw []probe.Result
	members := map[string][]probe.Result{}
	for range 10 {
		for range 3 {
			gw = append(gw, run(fmt.Sprintf("http://127.0.0.1:%d", port)))
		}
		for name, b := range backends {
			members[name] = append(members[name], run(b.URL))
		}
	}
	for _, r := range gw {
		if !r.Success {
			t.Fatalf("gateway probe failed: %s %s", r.Reason, r.Err)
		}
	}
	j, ok := JoinGateway(samplesOf(gw, "X-Served-By"), nil, map[string][]prober.GatewaySample{
		"b1": samplesOf(members["b1"], ""), "b2": samplesOf(members["b2"], ""), "b3": samplesOf(members["b3"], ""),
	})
	if !ok {
		t.Fatal("no join")
	}
	t.Logf("overhead median %.1f ms, p90 %.1f ms; slowest %s spread %.2f; share %v; member TTFT %v",
		j.OverheadMedian*1e3, j.OverheadP90*1e3, j.Slowest, j.Spread, j.Share, j.MemberTTFT)
	if j.Slowest != "b3" || j.Spread < 1.5 {
		t.Errorf("slowest %q spread %.2f, want b3 at about 2", j.Slowest, j.Spread)
	}
	for _, name := range []string{"b1", "b2", "b3"} {
		if s := j.Share[name]; math.Abs(s-1.0/3) > 0.1 {
			t.Errorf("share of %s %.2f, want about 1/3 (round robin)", name, s)
		}
	}
	if j.Share[ShareGateway] != 0 {
		t.Errorf("gateway answered %.2f itself, want 0", j.Share[ShareGateway])
	}
	// The gateway probes b3 served are the slow ones: the join attributes
	// the slow first tokens to the member, and the gateway's own overhead
	// is below the slow member's excess (a loaded machine adds jitter to
	// every path, so the bound is the excess, not a fixed time).
	var slow, fast []float64
	for i := range gw {
		if probe.Member(&gw[i], "X-Served-By") == "b3" {
			slow = append(slow, gw[i].TTFT.Seconds())
		} else {
			fast = append(fast, gw[i].TTFT.Seconds())
		}
	}
	if median(slow) <= median(fast) {
		t.Errorf("gateway probes served by b3: median TTFT %.1f ms, by the others %.1f ms; want b3's slower", median(slow)*1e3, median(fast)*1e3)
	}
	excess := j.MemberTTFT["b3"] - j.MemberTTFT["b1"]
	if math.Abs(j.OverheadMedian) >= excess {
		t.Errorf("overhead median %.1f ms not within the slow member's excess %.1f ms", j.OverheadMedian*1e3, excess*1e3)
	}
}

// TestJoinGatewayAttribution: a gateway probe with no member header was
// answered by the gateway itself (a queue timeout, a shed request) and
// counts apart from the members' shares; a header value maps to the
// member's target name through memberOf (the EPP names an endpoint, not a
// target).
func TestJoinGatewayAttribution(t *testing.T) {
	hdr := func(v string) http.Header {
		h := http.Header{}
		if v != "" {
			h.Set(probe.HeaderEPPDestination, v)
		}
		return h
	}
	ok := func(ttft time.Duration, dest string) probe.Result {
		return probe.Result{Success: true, StatusCode: 200, TTFT: ttft, ResponseHeader: hdr(dest)}
	}
	gw := []probe.Result{
		ok(30*time.Millisecond, "127.0.0.2:8000"),
		ok(30*time.Millisecond, "127.0.0.3:8000"),
		ok(30*time.Millisecond, "127.0.0.2:8000"),
		{Reason: probe.ReasonShed, StatusCode: 429, ResponseHeader: hdr("")},
		{Reason: probe.ReasonConnection}, // no answer: counts nowhere
	}
	members := map[string][]probe.Result{
		"pod-a": {ok(20*time.Millisecond, ""), ok(20*time.Millisecond, "")},
		"pod-b": {ok(20*time.Millisecond, ""), ok(40*time.Millisecond, "")},
	}
	j, found := JoinGateway(samplesOf(gw, probe.HeaderEPPDestination), map[string]string{"127.0.0.2:8000": "pod-a", "127.0.0.3:8000": "pod-b"},
		map[string][]prober.GatewaySample{"pod-a": samplesOf(members["pod-a"], ""), "pod-b": samplesOf(members["pod-b"], "")})
	if !found {
		t.Fatal("no join")
	}
	if want := map[string]float64{"pod-a": 0.5, "pod-b": 0.25, ShareGateway: 0.25}; !reflect.DeepEqual(j.Share, want) {
		t.Errorf("shares %v, want %v", j.Share, want)
	}
	if j.Slowest != "pod-b" {
		t.Errorf("slowest %q, want pod-b", j.Slowest)
	}
	if math.Abs(j.OverheadMedian-0.010) > 1e-9 {
		t.Errorf("overhead median %v, want 10ms (30ms through the gateway, 20ms direct)", j.OverheadMedian)
	}
}

// samplesOf is rs as the prober keeps them for a gateway join.
func samplesOf(rs []probe.Result, memberHeader string) []prober.GatewaySample {
	out := make([]prober.GatewaySample, len(rs))
	for i := range rs {
		out[i] = prober.SampleOf(&rs[i], memberHeader)
	}
	return out
}

// A member header that names a backend outside the gateway's members counts
// as ShareOther, never under its own value (an unbounded label); a member's
// target name needs no memberOf entry, and an address matches whatever its
// case.
func TestJoinGatewayOther(t *testing.T) {
	gw := []prober.GatewaySample{
		{Answered: true, Member: "pod-a"},
		{Answered: true, Member: "10.0.0.9:8000"},
		{Answered: true},
		{Answered: true, Member: "POD-B.NS:8000"},
	}
	members := map[string][]prober.GatewaySample{"pod-a": nil, "pod-b": nil}
	j, ok := JoinGateway(gw, map[string]string{"pod-b.ns:8000": "pod-b"}, members)
	if !ok {
		t.Fatal("no join")
	}
	want := map[string]float64{"pod-a": 0.25, "pod-b": 0.25, ShareGateway: 0.25, ShareOther: 0.25}
	if !reflect.DeepEqual(j.Share, want) {
		t.Errorf("shares %v, want %v", j.Share, want)
	}
	if !math.IsNaN(j.OverheadMedian) || !math.IsNaN(j.Spread) {
		t.Errorf("overhead %v spread %v without successful probes, want NaN", j.OverheadMedian, j.Spread)
	}
}

// TestJoinGatewayUnreadableMember: a member header made only of characters
// the prober drops ("***") says a backend answered, one the prober cannot
// name: it counts as ShareOther, never as the gateway answering itself.
func TestJoinGatewayUnreadableMember(t *testing.T) {
	sample := func(h string) prober.GatewaySample {
		res := &probe.Result{StatusCode: http.StatusOK, ResponseHeader: http.Header{}}
		if h != "" {
			res.ResponseHeader.Set("X-Served-By", h)
		}
		return prober.SampleOf(res, "X-Served-By")
	}
	gw := []prober.GatewaySample{sample("***"), sample(" \u00e9\u00e9 "), sample("pod-a"), sample("")}
	j, ok := JoinGateway(gw, nil, map[string][]prober.GatewaySample{"pod-a": nil})
	if !ok {
		t.Fatal("no join")
	}
	want := map[string]float64{"pod-a": 0.25, ShareGateway: 0.25, ShareOther: 0.5}
	if !reflect.DeepEqual(j.Share, want) {
		t.Errorf("shares %v, want %v", j.Share, want)
	}
}
