package simtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// pdPair starts a prefill and a decode simulator with vLLM's NixlConnector
// and the proxy in front of them, disaggregating prompts above 64 tokens.
func pdPair(t *testing.T) (decodeURL string, pd *PD) {
	t.Helper()
	nixl := func(role string) func(*simulator.Config) {
		return func(c *simulator.Config) {
			c.TTFT, c.ITL = 150*time.Millisecond, 5*time.Millisecond
			c.KVTransfer = simulator.KVTransferConfig{Connector: simulator.KVConnectorNixl, Role: role}
		}
	}
	_, pts, _ := Start(t, nixl(simulator.KVRoleProducer))
	_, dts, _ := Start(t, nixl(simulator.KVRoleConsumer))
	return dts.URL, StartPD(t, pts.URL, dts.URL, 64)
}

// ttft streams a completion of prompt through url and returns its time to
// first token and its token count.
func ttft(t *testing.T, url, prompt string) (time.Duration, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "sim-model", "prompt": prompt, "max_tokens": 8, "stream": true})
	start := time.Now()
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("HTTP %d: %s", resp.StatusCode, b)
	}
	var first time.Duration
	tokens := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		if first == 0 {
			first = time.Since(start)
		}
		tokens++
	}
	return first, tokens
}

func samples(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" || l.GetName() == "reason" || l.GetName() == "decision_type" {
					key += "/" + l.GetValue()
				}
			}
			switch {
			case m.GetHistogram() != nil:
				out[key+"/count"] += float64(m.GetHistogram().GetSampleCount())
				out[key+"/sum"] += m.GetHistogram().GetSampleSum()
			case m.GetCounter() != nil:
				out[key] += m.GetCounter().GetValue()
			default:
				out[key] += m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// TestPDProxyDisaggregates: a long prompt goes prefill then decode with
// vLLM's kv_transfer_params, the decode instance skips its prefill (its
// own TTFT of 150 ms does not come on top of the prefill instance's), pulls the blocks and counts them as
// external_kv_transfer and in NIXL's families; a short prompt runs on the
// decode instance alone, prefill included. A slow transfer raises only the
// long prompt's TTFT.
func TestPDProxyDisaggregates(t *testing.T) {
	decodeURL, pd := pdPair(t)
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40) // ~450 tokens
	short := "Say hello."

	fast, n := ttft(t, pd.URL, long)
	if n != 8 {
		t.Fatalf("long prompt: %d tokens, want 8", n)
	}
	// The prefill instance's 150 ms, the 5 ms pull, one 5 ms decode step:
	// not the decode instance's own 150 ms prefill on top.
	if fast < 150*time.Millisecond || fast >= 290*time.Millisecond {
		t.Errorf("disaggregated TTFT %v, want the prefill instance's 150ms + the pull + a step, without a second prefill", fast)
	}
	shortTTFT, _ := ttft(t, pd.URL, short)
	if shortTTFT < 150*time.Millisecond {
		t.Errorf("decode-only TTFT %v, want the decode instance's 150ms prefill", shortTTFT)
	}
	if d, p := pd.Decisions(); d != 1 || p != 1 {
		t.Errorf("decisions decode-only %d, prefill-decode %d; want 1 and 1", d, p)
	}
	m := samples(t, decodeURL)
	if got := m["vllm:nixl_xfer_time_seconds/count"]; got != 1 {
		t.Errorf("vllm:nixl_xfer_time_seconds count %v, want 1", got)
	}
	if m["vllm:prompt_tokens_by_source_total/external_kv_transfer"] < 400 {
		t.Errorf("external_kv_transfer prompt tokens %v, want the long prompt's", m["vllm:prompt_tokens_by_source_total/external_kv_transfer"])
	}
	if m["vllm:nixl_bytes_transferred/sum"] <= 0 {
		t.Errorf("vllm:nixl_bytes_transferred sum %v", m["vllm:nixl_bytes_transferred/sum"])
	}
	pm := samples(t, pd.URL)
	if pm["llm_d_epp_disagg_decision_total/prefill-decode"] != 1 || pm["llm_d_epp_disagg_decision_total/decode-only"] != 1 {
		t.Errorf("proxy decisions %v", pm)
	}

	resp, err := http.Post(decodeURL+"/admin/config", "application/json", strings.NewReader(`{"kv_transfer_delay":"400ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/admin/config: HTTP %d", resp.StatusCode)
	}
	slow, _ := ttft(t, pd.URL, long)
	if slow < fast+350*time.Millisecond {
		t.Errorf("with a 400ms transfer the disaggregated TTFT is %v (was %v)", slow, fast)
	}
	shortAgain, _ := ttft(t, pd.URL, short)
	if shortAgain > shortTTFT+100*time.Millisecond {
		t.Errorf("decode-only TTFT %v rose with the transfer (was %v)", shortAgain, shortTTFT)
	}
	m = samples(t, decodeURL)
	if sum := m["vllm:nixl_xfer_time_seconds/sum"]; sum < 0.4 {
		t.Errorf("vllm:nixl_xfer_time_seconds sum %v, want the 400ms pull", sum)
	}
}

// TestKVTransferParamsIgnoredWithoutConnector: without --kv-transfer-config,
// a request's kv_transfer_params changes nothing, as in vLLM.
func TestKVTransferParamsIgnoredWithoutConnector(t *testing.T) {
	_, ts, _ := Start(t, nil)
	body := `{"model":"sim-model","prompt":"Say hello.","max_tokens":1,"kv_transfer_params":{"do_remote_decode":true}}`
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), "kv_transfer_params") {
		t.Errorf("HTTP %d %s", resp.StatusCode, b)
	}
	if _, ok := samples(t, ts.URL)["vllm:nixl_xfer_time_seconds/count"]; ok {
		t.Error("NIXL families without a connector")
	}
}
