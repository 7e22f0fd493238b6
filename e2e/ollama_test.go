package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/gguf"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// The second real engine: Ollama v0.17.4 (built by scripts/e2e-tools.sh from
// the Go module proxy), serving a model internal/gguf writes, imported with
// `ollama create` from a Modelfile. Ollama has no /metrics and no /health:
// its targets set scrape_metrics: false and health_path: / (Ollama answers
// GET / with "Ollama is running"), and it lists a model created as "tiny" as
// "tiny:latest". Its OpenAI-compatible /v1 endpoints carry no timings; its
// native /api/generate does (prompt_eval_duration, eval_duration, eval_count).

// ollamaBin returns the ollama that `make e2e` builds and caches
// (scripts/e2e-tools.sh ollama) and names in E2E_OLLAMA_DIR, or skips, saying
// so where make test shows it.
func ollamaBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("E2E_OLLAMA_DIR")
	if dir == "" {
		testtool.Skip(t, "Ollama (E2E_OLLAMA_DIR)", "make e2e builds and caches it with scripts/e2e-tools.sh ollama")
	}
	bin := filepath.Join(dir, "ollama")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("E2E_OLLAMA_DIR: %v", err)
	}
	return bin
}

// ollamaServer is one `ollama serve` on 127.0.0.1, its models, keys and
// home in the test's temporary directories.
type ollamaServer struct {
	bin, addr string
	env       []string
	p         *process
}

func (o *ollamaServer) url() string { return "http://" + o.addr }

// startOllama starts `ollama serve` on a free port, offline (OLLAMA_NO_CLOUD),
// one request at a time (OLLAMA_NUM_PARALLEL=1, its default, stated), the
// model kept loaded for the whole test, and waits for GET / to answer.
// extraEnv adds or overrides Ollama's settings.
func startOllama(t *testing.T, bin string, extraEnv ...string) *ollamaServer {
	t.Helper()
	o := &ollamaServer{bin: bin, addr: freeAddr(t)}
	o.env = append([]string{"HOME=" + t.TempDir(), "OLLAMA_HOST=" + o.addr, "OLLAMA_MODELS=" + t.TempDir(),
		"OLLAMA_NO_CLOUD=1", "OLLAMA_NUM_PARALLEL=1", "OLLAMA_KEEP_ALIVE=1h", "OLLAMA_CONTEXT_LENGTH=4096"}, extraEnv...)
	o.p = startProcessEnv(t, "ollama", o.env, bin, "serve")
	// SIGTERM makes ollama serve unload its runners (child processes without a
	// death signal); the runners still alive at the end are killed.
	t.Cleanup(func() {
		runners := childPIDs(o.p.cmd.Process.Pid)
		if !o.p.halted {
			o.p.halt(t)
		}
		for _, pid := range runners {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill() // an error: it has exited already
			}
		}
	})
	if err := waitReady(t.Context(), o.p, o.url()+"/", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return o
}

// childPIDs lists the children of pid (Ollama's runners).
func childPIDs(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// create imports the GGUF file at model as name with `ollama create` and a
// Modelfile holding only FROM: nothing is downloaded. It returns how long the
// import took.
func (o *ollamaServer) create(t *testing.T, name, model string) time.Duration {
	t.Helper()
	mf := filepath.Join(t.TempDir(), "Modelfile")
	if err := os.WriteFile(mf, []byte("FROM "+model+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), o.bin, "create", name, "-f", mf)
	cmd.Env = append(os.Environ(), o.env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ollama create %s: %v\n%s", name, err, b)
	}
	return time.Since(start)
}

// ollamaGenerate is the answer of one native request, not streamed:
// Ollama's own counts and timing of it.
type ollamaGenerate struct {
	PromptEvalCount    int           `json:"prompt_eval_count"`
	PromptEvalDuration time.Duration `json:"prompt_eval_duration"`
	EvalCount          int           `json:"eval_count"`
	EvalDuration       time.Duration `json:"eval_duration"`
	TotalDuration      time.Duration `json:"total_duration"`
}

func (o *ollamaServer) generate(ctx context.Context, model, prompt string, n int) (ollamaGenerate, error) {
	return o.native(ctx, "/api/generate", model, prompt, n)
}

// native is one request of Ollama's native API, not streamed: /api/generate
// with prompt, or /api/chat with prompt as the one user message.
func (o *ollamaServer) native(ctx context.Context, api, model, prompt string, n int) (ollamaGenerate, error) {
	r := map[string]any{"model": model, "stream": false, "options": map[string]any{"num_predict": n, "temperature": 0}}
	if api == "/api/chat" {
		r["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		r["prompt"] = prompt
	}
	body, err := json.Marshal(r)
	if err != nil {
		return ollamaGenerate{}, fmt.Errorf("encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url()+api, bytes.NewReader(body))
	if err != nil {
		return ollamaGenerate{}, fmt.Errorf("building request: %w", err)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return ollamaGenerate{}, fmt.Errorf("POST %s: %w", api, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return ollamaGenerate{}, fmt.Errorf("POST %s: HTTP %d: %s", api, resp.StatusCode, b)
	}
	var g ollamaGenerate
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("decoding %s: %w", api, err)
	}
	return g, nil
}

// ollamaModuleTokens is max_tokens of TestOllamaProbes' modules. Below 32:
// Ollama ends a generation that repeats one token (whitespace trimmed) 31
// times in a row (llm/server.go, "token repeat limit reached", logged at debug
// level only), and its /v1 stream then ends without finish_reason and without
// data: [DONE], which the prober rightly counts as truncated. The random
// weights of internal/gguf's models fall into such a loop on some prompts
// ("... way way way way"), so a longer probe fails now and then.
const ollamaModuleTokens = 30

// TestOllamaProbes: the prober's completions and chat probes against a real
// Ollama succeed through its OpenAI-compatible /v1 endpoints, each counting
// exactly max_tokens output tokens (the model never ends early, and
// Ollama's own eval_count for the same prompt says the same); the target
// configured with model: tiny reads the model listed as tiny:latest as up,
// and health_path: / makes its health up without /health or /metrics. The
// prober's TTFT and TPOT are set against Ollama's own timings of native
// requests alternated with the probes (Ollama's /v1 responses carry none):
// logged, and the median over the pairs of the probe's TPOT over Ollama's
// decode time per token held within a factor of two: the two requests of a
// pair are different requests, seconds apart, on a shared machine, so this
// bound catches a unit or counting error, not a few per cent.
func TestOllamaProbes(t *testing.T) {
	bin := ollamaBin(t)
	proberBin, _ := binaries(t)
	ctx := t.Context()
	ol := startOllama(t, bin)
	took := ol.create(t, "tiny", writeModel(t, gguf.Small()))
	t.Logf("ollama create tiny (the Small model, 53 MB) took %s", took.Round(time.Millisecond))

	// URL probes run only when asked: nothing else reaches the engine between
	// a probe and the native request beside it. The target is probed once an
	// hour (its schedule plays no part) and checked at start: health and
	// model listing.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {probe_interval: 1h, scrape_interval: 1s, probe_timeout: 30s}
modules:
  completion: {prober: completions, prompt: %[1]q, max_tokens: %[4]d, ignore_eos: true}
  chat: {prober: chat, messages: [{role: user, content: %[1]q}], max_tokens: %[4]d}
  completion-exact: {prober: completions, prompt: %[1]q, max_tokens: %[4]d, ignore_eos: true, nonce: false}
  chat-exact: {prober: chat, messages: [{role: user, content: %[1]q}], max_tokens: %[4]d, nonce: false}
targets:
  - {name: ollama, url: %[2]q, model: tiny, scrape_metrics: false, health_path: /, modules: [completion, chat]}
url_probes:
  allowed_urls: [%[3]q]
  modules: [completion, chat, completion-exact, chat-exact]
`, llamaPrompt, ol.url(), regexp.QuoteMeta(ol.url()), ollamaModuleTokens)), 0o644); err != nil {
		t.Fatal(err)
	}
	proberAddr := freeAddr(t)
	proberURL := "http://" + proberAddr
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, proberURL+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// The target's check: model tiny matches the listed tiny:latest, health
	// from GET /.
	if err := waitFor(ctx, 30*time.Second, 250*time.Millisecond, "health and model up on target ollama", func(ctx context.Context) (bool, error) {
		m, err := metricsText(ctx, proberURL+"/metrics")
		if err != nil {
			return false, err
		}
		h, mu := m[`vllm_probe_health_up{model="tiny",target="ollama"}`], m[`vllm_probe_models_up{model="tiny",target="ollama"}`]
		return h == 1 && mu == 1, fmt.Errorf("health_up %v, models_up %v", h, mu)
	}); err != nil {
		t.Error(err)
	}

	// Warm-up: the first request loads the model into a runner.
	if _, err := ol.generate(ctx, "tiny", "warm up", 4); err != nil {
		t.Fatal(err)
	}
	const rounds = 8
	type pair struct {
		module                 string
		ttft, tpot             time.Duration
		output, prompt         float64
		prefill, decodePerTok  time.Duration
		evalCount, promptCount int
	}
	var rows []pair
	for i := range 2 * rounds {
		m := []string{"completion", "chat"}[i%2]
		res, err := llamaProbe(ctx, proberURL, ol.url(), m)
		if err != nil {
			t.Fatal(err)
		}
		if res["vllm_probe_success"] != 1 {
			t.Fatalf("probe %d (%s) against Ollama failed: %v", i, m, failures(res))
		}
		// The native request: the same prompt behind a word of its own (as the
		// probe's nonce, no prompt-cache hit), the same number of tokens.
		g, err := ol.generate(ctx, "tiny", fmt.Sprintf("r%d %s", i, llamaPrompt), ollamaModuleTokens)
		if err != nil {
			t.Fatal(err)
		}
		p := pair{module: m,
			ttft:   secs(res["vllm_probe_time_to_first_token_seconds_sum"]),
			tpot:   secs(res["vllm_probe_time_per_output_token_seconds_sum"]),
			output: res[`vllm_probe_tokens_total{kind="output"}`], prompt: res[`vllm_probe_tokens_total{kind="prompt"}`],
			prefill: g.PromptEvalDuration, evalCount: g.EvalCount, promptCount: g.PromptEvalCount}
		if g.EvalCount > 1 {
			p.decodePerTok = g.EvalDuration / time.Duration(g.EvalCount-1)
		}
		rows = append(rows, p)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%-10s %10s %12s %10s %12s %10s %13s\n", "module", "TTFT", "native pre", "TPOT", "native tok", "out/eval", "prompt/native")
	var ttfts, prefills, tpots, decodes []time.Duration
	var ratios []float64
	for i, p := range rows {
		ttfts, prefills, tpots, decodes = append(ttfts, p.ttft), append(prefills, p.prefill), append(tpots, p.tpot), append(decodes, p.decodePerTok)
		ratios = append(ratios, float64(p.tpot)/float64(p.decodePerTok))
		fmt.Fprintf(&table, "%-10s %10s %12s %10s %12s %5.0f/%-4d %6.0f/%-6d\n", p.module, ms(p.ttft), ms(p.prefill), ms(p.tpot), ms(p.decodePerTok),
			p.output, p.evalCount, p.prompt, p.promptCount)
		if p.output != ollamaModuleTokens || p.evalCount != ollamaModuleTokens {
			t.Errorf("pair %d (%s): the probe counted %v output tokens, Ollama's own eval_count %d, want %d each", i, p.module, p.output, p.evalCount, ollamaModuleTokens)
		}
		if p.prompt <= 0 || p.ttft <= 0 || p.tpot <= 0 {
			t.Errorf("pair %d (%s): prompt tokens %v, TTFT %s, TPOT %s: want each > 0", i, p.module, p.prompt, ms(p.ttft), ms(p.tpot))
		}
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	mTTFT, mPrefill, mTPOT, mDecode := median(ttfts), median(prefills), median(tpots), median(decodes)
	slices.Sort(ratios)
	med := ratios[len(ratios)/2]
	fmt.Fprintf(&table, "medians over %d pairs: TTFT %s vs prompt_eval_duration %s (%+.2f ms); TPOT %s vs eval_duration/(eval_count-1) %s; TPOT ratio per pair: median %.4f (%.4f-%.4f)",
		len(rows), ms(mTTFT), ms(mPrefill), float64(mTTFT-mPrefill)/1e6, ms(mTPOT), ms(mDecode), med, ratios[0], ratios[len(ratios)-1])
	t.Logf("prober against Ollama (probe, then a native /api/generate of the same length):\n%s", table.String())
	if med < 0.5 || med > 2 || math.IsNaN(med) {
		t.Errorf("median per-pair ratio of the probe's TPOT to Ollama's own decode time per token %.4f, want within a factor of 2", med)
	}

	// Prompt tokens, exactly: without the nonce the probe's prompt is known,
	// and Ollama's own prompt_eval_count for the same prompt (its template
	// applied, as on /v1) is what the probe read from usage.prompt_tokens.
	for _, c := range []struct{ module, api string }{{"completion-exact", "/api/generate"}, {"chat-exact", "/api/chat"}} {
		res, err := llamaProbe(ctx, proberURL, ol.url(), c.module)
		if err != nil {
			t.Fatal(err)
		}
		if res["vllm_probe_success"] != 1 {
			t.Fatalf("probe %s against Ollama failed: %v", c.module, failures(res))
		}
		g, err := ol.native(ctx, c.api, "tiny", llamaPrompt, ollamaModuleTokens)
		if err != nil {
			t.Fatal(err)
		}
		prompt, output := res[`vllm_probe_tokens_total{kind="prompt"}`], res[`vllm_probe_tokens_total{kind="output"}`]
		t.Logf("%s: the probe counted %v prompt and %v output tokens; Ollama's %s of the same prompt: prompt_eval_count %d, eval_count %d",
			c.module, prompt, output, c.api, g.PromptEvalCount, g.EvalCount)
		if prompt != float64(g.PromptEvalCount) || output != float64(g.EvalCount) {
			t.Errorf("%s: the probe counted %v prompt and %v output tokens, Ollama's %s counts %d and %d for the same prompt",
				c.module, prompt, output, c.api, g.PromptEvalCount, g.EvalCount)
		}
	}

	// No /metrics to scrape: the target is not scraped, so it has no
	// vllm_server_up series (and VLLMMetricsScrapeFailing nothing to read).
	m, err := metricsText(ctx, proberURL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m[`vllm_server_up{target="ollama"}`]; ok {
		t.Errorf("vllm_server_up{target=\"ollama\"} = %v for a target with scrape_metrics: false", v)
	}
}

// TestOllamaAlerts: on a real Prometheus with the mixin's rules (time-scaled
// as the other end-to-end tests), VLLMEndpointDown and VLLMEngineHung mean
// on Ollama what they mean on vLLM, given health_path: /.
//   - Steady: the probes succeed; the target with health_path: / raises
//     neither alert (nor VLLMMetricsScrapeFailing: it is not scraped),
//     while a second target on the same Ollama left at /health (404) fires
//     VLLMEndpointDown although its probes succeed: what the key is for.
//   - Saturated (two clients keep long requests queued on Ollama's one
//     slot): probes time out while GET / answers 200: VLLMEngineHung fires for
//     the target with the key, and never for the one without (its health is
//     never 1).
//   - Stopped (ollama serve ends): probes fail to connect, health is 0:
//     VLLMEndpointDown fires.
func TestOllamaAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Ollama, vllm_prober and Prometheus for about a minute; skipped with -short")
	}
	bin := ollamaBin(t)
	promBin := prometheusBinary(t)
	proberBin, _ := binaries(t)
	ctx := t.Context()
	ol := startOllama(t, bin)
	ol.create(t, "tiny", writeModel(t, gguf.Tiny()))

	cfg := filepath.Join(t.TempDir(), "vllm_prober.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {probe_interval: 1s, scrape_interval: 1s, rate_window: 10s, probe_timeout: 1s}
modules:
  completion: {prober: completions, prompt: %[1]q, max_tokens: 8, ignore_eos: true}
targets:
  - {name: ollama, url: %[2]q, model: tiny, scrape_metrics: false, health_path: /, modules: [completion]}
  - {name: nohealth, url: %[2]q, model: tiny, scrape_metrics: false, modules: [completion]}
`, llamaPrompt, ol.url())), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	proberURL := "http://" + addr
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfg, "--web.listen-address="+addr)
	if err := waitReady(ctx, prober, proberURL+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	_, promURL := startPrometheus(t, promBin, t.TempDir(), []string{addr})
	client := &mixin.Client{BaseURL: promURL, HTTP: httpClient}
	tl := newTimeline()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := watchAlerts(watchCtx, client, tl, 250*time.Millisecond)
	defer func() {
		stopWatch()
		<-watched
		t.Logf("timeline:\n%s", tl)
	}()

	const (
		success     = `vllm_probe_success{model="tiny",module="completion",target="ollama"}`
		health      = `vllm_probe_health_up{model="tiny",target="ollama"}`
		nohealthOK  = `vllm_probe_success{model="tiny",module="completion",target="nohealth"}`
		nohealthUp  = `vllm_probe_health_up{model="tiny",target="nohealth"}`
		outputTotal = `vllm_probe_tokens_total{kind="output",model="tiny",module="completion",target="ollama"}`
	)
	if err := waitFor(ctx, 60*time.Second, 250*time.Millisecond, "probes succeeding on both targets", func(ctx context.Context) (bool, error) {
		m, err := metricsText(ctx, proberURL+"/metrics")
		if err != nil {
			return false, err
		}
		return m[success] == 1 && m[health] == 1 && m[nohealthOK] == 1 && m[nohealthUp] == 0 && m[outputTotal] > 0,
			fmt.Errorf("ollama: success %v health %v output %v; nohealth: success %v health %v", m[success], m[health], m[outputTotal], m[nohealthOK], m[nohealthUp])
	}); err != nil {
		t.Fatal(err)
	}
	tl.add("steady: probes succeed on both targets; health_up 1 (GET /) and 0 (GET /health, 404)")

	// Steady: the target left at /health reads down while it serves.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := client.WaitForAlert(wctx, "VLLMEndpointDown", map[string]string{"target": "nohealth"}, 250*time.Millisecond)
	cancel()
	if err != nil {
		t.Errorf("VLLMEndpointDown did not fire for the target left at /health: %v", err)
	}
	m, err := metricsText(ctx, proberURL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m[outputTotal] <= 0 || math.Mod(m[outputTotal], 8) != 0 {
		t.Errorf("output tokens counted on target ollama: %v, want a positive multiple of max_tokens 8", m[outputTotal])
	}
	for _, name := range []string{"VLLMEndpointDown", "VLLMEngineHung", "VLLMMetricsScrapeFailing"} {
		if firingNamed(ctx, t, client, name, "ollama") {
			t.Errorf("%s is pending or firing for target ollama while it serves (alerts of the target: %v)", name, firingFor(ctx, t, client, "ollama"))
		}
	}

	// Saturated: two clients keep long requests queued on the one slot.
	longCtx, cancelLong := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model":"tiny","prompt":%q,"max_tokens":3500,"stream":true}`, llamaPrompt)
			for longCtx.Err() == nil {
				_ = stream(longCtx, http.DefaultClient, ol.url(), body)
			}
		}()
	}
	defer func() { cancelLong(); wg.Wait() }()
	tl.add("saturating: two clients, 3500-token requests back to back")
	var codes []int
	hctx, stopHealth := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	hwg.Add(1)
	go func() {
		defer hwg.Done()
		for hctx.Err() == nil {
			c, err := httpStatus(hctx, ol.url()+"/")
			if hctx.Err() != nil {
				return
			}
			if err != nil {
				c = -1
			}
			codes = append(codes, c)
			select {
			case <-hctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	wctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	a, err := client.WaitForAlert(wctx, "VLLMEngineHung", map[string]string{"target": "ollama"}, 250*time.Millisecond)
	cancel()
	stopHealth()
	hwg.Wait()
	if err != nil {
		s, _ := queryValues(ctx, promURL, `{__name__=~"vllm_probe_failures_total|vllm_probe_attempts_total|vllm_probe_health_up",target="ollama"}`)
		t.Errorf("VLLMEngineHung did not fire on the saturated Ollama: %v\nseries: %v", err, s)
	} else {
		t.Logf("VLLMEngineHung fired for target ollama (value %s); GET / answered %d times", a.Value, len(codes))
	}
	if len(codes) == 0 || slices.ContainsFunc(codes, func(c int) bool { return c != http.StatusOK }) {
		t.Errorf("GET / during the saturation answered %v, want 200 throughout", codes)
	}
	if down := firingNamed(ctx, t, client, "VLLMEndpointDown", "ollama"); down {
		t.Errorf("VLLMEndpointDown is pending or firing for target ollama while GET / answers 200")
	}
	// The target left at /health never has health 1: VLLMEngineHung, which
	// reads /health answering, cannot fire for it however hung the engine is.
	hungNoHealth := firingNamed(ctx, t, client, "VLLMEngineHung", "nohealth")
	cancelLong()
	wg.Wait()

	// Stopped: ollama serve ends; the endpoint is down.
	tl.add("stopping ollama serve")
	ol.p.halt(t)
	wctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	_, err = client.WaitForAlert(wctx, "VLLMEndpointDown", map[string]string{"target": "ollama"}, 250*time.Millisecond)
	cancel()
	if err != nil {
		t.Errorf("VLLMEndpointDown did not fire after Ollama stopped: %v", err)
	}
	m, err = metricsText(ctx, proberURL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if c := m[`vllm_probe_failures_total{model="tiny",module="completion",reason="connection",target="ollama"}`]; c == 0 {
		t.Errorf("no probe of the stopped Ollama failed with reason connection")
	}
	if hungNoHealth {
		t.Errorf("VLLMEngineHung went pending or fired for the target left at /health, whose health was never 1")
	}
}

// firingFor lists the alerts pending or firing for target.
func firingFor(ctx context.Context, t *testing.T, c *mixin.Client, target string) []string {
	t.Helper()
	alerts, err := c.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range alerts {
		if a.Labels["target"] == target {
			out = append(out, a.State+" "+a.Labels["alertname"])
		}
	}
	return out
}

// firingNamed reports whether alert name is pending or firing for target.
func firingNamed(ctx context.Context, t *testing.T, c *mixin.Client, name, target string) bool {
	t.Helper()
	return slices.ContainsFunc(firingFor(ctx, t, c, target), func(s string) bool { return strings.HasSuffix(s, " "+name) })
}

// TestOllamaQueueFull: Ollama refuses a request with 503 "server busy,
// please try again.  maximum pending requests exceeded" when its queue of
// requests the scheduler has not placed yet is full (OLLAMA_MAX_QUEUE, here
// 1). That queue fills while a model loads: eight requests at once for a
// model not loaded yet, four of them the prober's probes. A refused probe
// reads overloaded, an admission refusal, never http_5xx.
func TestOllamaQueueFull(t *testing.T) {
	bin := ollamaBin(t)
	proberBin, _ := binaries(t)
	ctx := t.Context()
	ol := startOllama(t, bin, "OLLAMA_MAX_QUEUE=1")
	ol.create(t, "tiny", writeModel(t, gguf.Tiny()))

	cfg := filepath.Join(t.TempDir(), "vllm_prober.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {probe_interval: 1h, scrape_interval: 1s, probe_timeout: 30s}
modules:
  completion: {prober: completions, prompt: %[1]q, max_tokens: 8, ignore_eos: true}
targets:
  - {name: ollama, url: %[2]q, model: tiny, scrape_metrics: false, health_path: /, modules: [completion]}
url_probes:
  allowed_urls: [%[3]q]
  modules: [completion]
`, llamaPrompt, ol.url(), regexp.QuoteMeta(ol.url()))), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	proberURL := "http://" + addr
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfg, "--web.listen-address="+addr)
	if err := waitReady(ctx, prober, proberURL+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Up to three rounds, the model unloaded before each: the refusals depend
	// on the requests arriving while it loads.
	var reasons []string
	refused := 0
	for round := range 3 {
		if round > 0 {
			if err := ol.unload(ctx, "tiny"); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					body := fmt.Sprintf(`{"model":"tiny","prompt":%q,"max_tokens":8,"stream":true}`, llamaPrompt)
					if err := stream(ctx, http.DefaultClient, ol.url(), body); err != nil && strings.Contains(err.Error(), "HTTP 503") {
						mu.Lock()
						refused++
						mu.Unlock()
					}
					return
				}
				res, err := llamaProbe(ctx, proberURL, ol.url(), "completion")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					reasons = append(reasons, "error: "+err.Error())
					return
				}
				if res["vllm_probe_success"] == 1 {
					reasons = append(reasons, "success")
					return
				}
				reasons = append(reasons, strings.Join(failures(res), ","))
			}()
		}
		wg.Wait()
		if slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, `reason="overloaded"`) }) {
			break
		}
	}
	t.Logf("probes: %v; direct requests refused with 503: %d", reasons, refused)
	if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, `reason="overloaded"`) }) {
		t.Errorf("no probe read Ollama's full queue as overloaded in three rounds: %v (direct requests refused: %d)", reasons, refused)
	}
	for _, r := range reasons {
		if r != "success" && !strings.Contains(r, `reason="overloaded"`) {
			t.Errorf("a probe of Ollama with a full queue: %s, want success or overloaded", r)
		}
	}
}

// unload asks Ollama to unload model (keep_alive 0) and waits until
// /api/ps lists no model.
func (o *ollamaServer) unload(ctx context.Context, model string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url()+"/api/generate", strings.NewReader(fmt.Sprintf(`{"model":%q,"keep_alive":0}`, model)))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("unloading %s: %w", model, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return waitFor(ctx, 30*time.Second, 100*time.Millisecond, "no model loaded", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url()+"/api/ps", nil)
		if err != nil {
			return false, fmt.Errorf("building request: %w", err)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return false, fmt.Errorf("GET /api/ps: %w", err)
		}
		defer resp.Body.Close()
		var ps struct {
			Models []json.RawMessage `json:"models"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&ps); err != nil {
			return false, fmt.Errorf("decoding /api/ps: %w", err)
		}
		return len(ps.Models) == 0, fmt.Errorf("%d models loaded", len(ps.Models))
	})
}
