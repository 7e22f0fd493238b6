package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/gguf"
	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// The real-engine tests: llama.cpp's llama-server (release v0.4.0, commit
// 80fb11a, built by scripts/e2e-tools.sh from the source the npm package
// node-llama-cpp 3.21.1 ships) serving a model that internal/gguf writes at
// test time. The engine's own numbers for a request (its /metrics counters)
// are set against what the prober measured of the same request.

const llamaPrompt = "Tell me a short story about the quick brown fox and the lazy dog in the city at night"

// llamaServerBin returns the llama-server that `make e2e` builds and caches
// (scripts/e2e-tools.sh llama-server) and names in E2E_LLAMA_SERVER_DIR, or
// skips, saying so where make test shows it.
func llamaServerBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("E2E_LLAMA_SERVER_DIR")
	if dir == "" {
		testtool.Skip(t, "llama.cpp's llama-server (E2E_LLAMA_SERVER_DIR)",
			"make e2e builds and caches it with scripts/e2e-tools.sh llama-server")
	}
	bin := filepath.Join(dir, "llama-server")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("E2E_LLAMA_SERVER_DIR: %v", err)
	}
	return bin
}

// writeModel writes m into the test's temporary directory.
func writeModel(t *testing.T, m gguf.Model) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), m.Name+".gguf")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// llamaServer is one llama-server process, restartable on its address.
type llamaServer struct {
	bin, model, addr string
	args             []string
	p                *process
}

func (l *llamaServer) url() string { return "http://" + l.addr }

// startLlamaServer serves model (its alias the file's base name) on a free
// port with --metrics, slots parallel slots and 2 threads.
func startLlamaServer(t *testing.T, bin, model string, slots int, extra ...string) *llamaServer {
	t.Helper()
	l := &llamaServer{bin: bin, model: model, addr: freeAddr(t)}
	host, port, _ := strings.Cut(l.addr, ":")
	l.args = append([]string{"-m", model, "--host", host, "--port", port, "--metrics",
		"-a", strings.TrimSuffix(filepath.Base(model), ".gguf"), "-np", strconv.Itoa(slots), "-c", strconv.Itoa(4096 * slots),
		"-t", "2"}, extra...)
	l.start(t)
	return l
}

func (l *llamaServer) start(t *testing.T) {
	t.Helper()
	l.p = startProcess(t, "llama-server", l.bin, l.args...)
	if err := waitReady(t.Context(), l.p, l.url()+"/health", 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// metricsText GETs a Prometheus text exposition and returns its samples,
// keyed by the series as written (name{labels}).
func metricsText(ctx context.Context, u string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", u, resp.StatusCode, b)
	}
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<16), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("GET %s: line %q: %w", u, line, err)
		}
		out[line[:i]] = v
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", u, err)
	}
	return out, nil
}

// llamaCounters are llama-server's cumulative counters.
type llamaCounters struct {
	promptTokens, cachedTokens, promptSeconds, predicted, predictedSeconds float64
}

func readLlamaCounters(ctx context.Context, base string) (llamaCounters, error) {
	m, err := metricsText(ctx, base+"/metrics")
	if err != nil {
		return llamaCounters{}, err
	}
	c := llamaCounters{
		promptTokens:     m["llamacpp:prompt_tokens_total"],
		cachedTokens:     m["llamacpp:prompt_tokens_cached_total"],
		promptSeconds:    m["llamacpp:prompt_seconds_total"],
		predicted:        m["llamacpp:tokens_predicted_total"],
		predictedSeconds: m["llamacpp:tokens_predicted_seconds_total"],
	}
	for _, k := range []string{"llamacpp:prompt_tokens_total", "llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total"} {
		if _, ok := m[k]; !ok {
			return c, fmt.Errorf("llama-server's /metrics has no %s", k)
		}
	}
	return c, nil
}

func (c llamaCounters) minus(o llamaCounters) llamaCounters {
	return llamaCounters{c.promptTokens - o.promptTokens, c.cachedTokens - o.cachedTokens,
		c.promptSeconds - o.promptSeconds, c.predicted - o.predicted, c.predictedSeconds - o.predictedSeconds}
}

// probeOnce runs /probe on the prober for target (a URL the url_probes
// allow) and module, and returns the probe's metrics.
func llamaProbe(ctx context.Context, proberURL, target, module string) (map[string]float64, error) {
	return metricsText(ctx, proberURL+"/probe?"+url.Values{"target": {target}, "module": {module}}.Encode())
}

// agreement is one paired probe: the prober's figures and the engine's.
type agreement struct {
	module                    string
	ttft, prefill             time.Duration
	tpot, decodePerToken      time.Duration
	output, predicted         float64
	prompt, evaluated, cached float64
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }

// TestLlamaServerAgreement sets every probe the prober runs against a real
// llama-server (one slot, so each request is alone) against the engine's own
// counters for that request: output tokens exact, prompt tokens = evaluated
// + cached, TTFT = the engine's prefill time + 0-25 ms (HTTP, template,
// first sample, flush), TPOT within 3 % of the engine's decode time per
// token, in the median and for at least two thirds of the probes (a loaded
// machine's scheduling can move one probe by tens of ms); over the run the token totals equal the counter deltas. The
// collector reads the engine as llamacpp, configured and detected.
func TestLlamaServerAgreement(t *testing.T) {
	bin := llamaServerBin(t)
	proberBin, _ := binaries(t)
	ctx := t.Context()
	dir := t.TempDir()
	ls := startLlamaServer(t, bin, writeModel(t, gguf.Small()), 1)

	// The paired probes are URL probes, which no schedule runs: nothing else
	// reaches the engine between the counter reads around a probe. The two
	// targets only scrape: one says engine: llamacpp, one leaves it to detection.
	cfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {probe_interval: 1h, scrape_interval: 1s, scrape_timeout: 900ms, rate_window: 10s, probe_timeout: 30s}
modules:
  completion: {prober: completions, prompt: %[1]q, max_tokens: 128, ignore_eos: true}
  chat: {prober: chat, messages: [{role: user, content: %[1]q}], max_tokens: 64, ignore_eos: true}
  responses: {prober: responses, prompt: %[1]q, max_tokens: 64}
targets:
  - {name: configured, url: %[2]q, engine: llamacpp, modules: none}
  - {name: detected, url: %[2]q, modules: none}
url_probes:
  allowed_urls: [%[3]q]
  modules: [completion, chat, responses]
`, llamaPrompt, ls.url(), regexp.QuoteMeta(ls.url()))), 0o644); err != nil {
		t.Fatal(err)
	}
	proberAddr := freeAddr(t)
	proberURL := "http://" + proberAddr
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, proberURL+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// One warm-up probe of each module: the first request of a fresh
	// server pays for allocations the engine does not time.
	modules := []string{"completion", "chat", "responses"}
	for _, m := range modules {
		if _, err := llamaProbe(ctx, proberURL, ls.url(), m); err != nil {
			t.Fatal(err)
		}
	}
	start, err := readLlamaCounters(ctx, ls.url())
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 5
	var rows []agreement
	var sumOut, sumPrompt float64
	for i := range rounds * len(modules) {
		m := modules[i%len(modules)]
		before, err := readLlamaCounters(ctx, ls.url())
		if err != nil {
			t.Fatal(err)
		}
		res, err := llamaProbe(ctx, proberURL, ls.url(), m)
		if err != nil {
			t.Fatal(err)
		}
		after, err := readLlamaCounters(ctx, ls.url())
		if err != nil {
			t.Fatal(err)
		}
		if res["vllm_probe_success"] != 1 {
			t.Fatalf("probe %d (%s) failed: %v", i, m, failures(res))
		}
		d := after.minus(before)
		a := agreement{
			module:    m,
			ttft:      secs(res["vllm_probe_time_to_first_token_seconds_sum"]),
			prefill:   secs(d.promptSeconds),
			tpot:      secs(res["vllm_probe_time_per_output_token_seconds_sum"]),
			output:    res[`vllm_probe_tokens_total{kind="output"}`],
			predicted: d.predicted,
			prompt:    res[`vllm_probe_tokens_total{kind="prompt"}`],
			evaluated: d.promptTokens,
			cached:    d.cachedTokens,
		}
		if d.predicted > 1 {
			a.decodePerToken = secs(d.predictedSeconds / (d.predicted - 1))
		}
		rows = append(rows, a)
		sumOut += a.output
		sumPrompt += a.prompt
	}
	end, err := readLlamaCounters(ctx, ls.url())
	if err != nil {
		t.Fatal(err)
	}

	var gaps []time.Duration
	var ratios []float64
	var table strings.Builder
	fmt.Fprintf(&table, "%-10s %10s %10s %9s %10s %10s %7s %9s %14s\n", "module", "TTFT", "prefill", "gap", "TPOT", "decode/tok", "ratio", "out/pred", "prompt=eval+cached")
	tight := 0
	for i, a := range rows {
		gap := a.ttft - a.prefill
		ratio := float64(a.tpot) / float64(a.decodePerToken)
		gaps, ratios = append(gaps, gap), append(ratios, ratio)
		fmt.Fprintf(&table, "%-10s %10s %10s %9s %10s %10s %7.4f %4.0f/%-4.0f %4.0f=%.0f+%.0f\n", a.module, ms(a.ttft), ms(a.prefill), ms(gap),
			ms(a.tpot), ms(a.decodePerToken), ratio, a.output, a.predicted, a.prompt, a.evaluated, a.cached)
		want := map[string]float64{"completion": 128, "chat": 64, "responses": 64}[a.module]
		if a.output != want || a.predicted != want {
			t.Errorf("probe %d (%s): output tokens %v, engine predicted %v, want %v each", i, a.module, a.output, a.predicted, want)
		}
		if a.prompt != a.evaluated+a.cached {
			t.Errorf("probe %d (%s): prompt tokens %v, engine evaluated %v + cached %v", i, a.module, a.prompt, a.evaluated, a.cached)
		}
		// Each probe: never faster than the engine, and about the same
		// decode speed; on a loaded 2-core machine one probe can lose tens of
		// ms to scheduling, so the tight bounds hold for most probes and for
		// the medians (checked below).
		if gap < 0 || math.Abs(ratio-1) > 0.25 {
			t.Errorf("probe %d (%s): TTFT %s - engine prefill %s = %s (want >= 0), TPOT %s / engine decode per token %s = %.4f (want within 25 %%)",
				i, a.module, ms(a.ttft), ms(a.prefill), ms(gap), ms(a.tpot), ms(a.decodePerToken), ratio)
		}
		if gap <= 25*time.Millisecond && math.Abs(ratio-1) <= 0.03 {
			tight++
		}
	}
	slices.Sort(gaps)
	sort.Float64s(ratios)
	tot := end.minus(start)
	fmt.Fprintf(&table, "TTFT - prefill: median %s (%s-%s); TPOT ratio: median %.4f (%.4f-%.4f); %d probes\n",
		ms(gaps[len(gaps)/2]), ms(gaps[0]), ms(gaps[len(gaps)-1]), ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], len(rows))
	fmt.Fprintf(&table, "tokens: output %.0f = Δtokens_predicted %.0f; prompt %.0f = Δprompt_tokens %.0f + Δprompt_tokens_cached %.0f",
		sumOut, tot.predicted, sumPrompt, tot.promptTokens, tot.cachedTokens)
	t.Logf("prober against llama-server, per probe:\n%s", table.String())
	if med := ratios[len(ratios)/2]; math.Abs(med-1) > 0.03 {
		t.Errorf("median TPOT ratio %.4f, want within 3 %% of the engine's decode time per token", med)
	}
	if med := gaps[len(gaps)/2]; med < 0 || med > 25*time.Millisecond {
		t.Errorf("median TTFT - engine prefill %s, want 0-25 ms", ms(med))
	}
	if tight*3 < len(rows)*2 {
		t.Errorf("%d of %d probes have TTFT - prefill within 0-25 ms and TPOT within 3 %% of the engine's, want at least two thirds", tight, len(rows))
	}
	if sumOut != tot.predicted || sumPrompt != tot.promptTokens+tot.cachedTokens {
		t.Errorf("token totals differ from the engine's counter deltas: output %v vs %v, prompt %v vs %v+%v",
			sumOut, tot.predicted, sumPrompt, tot.promptTokens, tot.cachedTokens)
	}

	// The collector reads the engine as llamacpp, named or detected.
	if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "both targets read as llamacpp", func(ctx context.Context) (bool, error) {
		m, err := metricsText(ctx, proberURL+"/metrics")
		if err != nil {
			return false, err
		}
		for _, tg := range []string{"configured", "detected"} {
			k := fmt.Sprintf(`vllm_server_engine_recognized{engine="llamacpp",target=%q}`, tg)
			if m[k] != 1 || m[fmt.Sprintf(`vllm_server_up{target=%q}`, tg)] != 1 {
				return false, fmt.Errorf("%s = %v, up %v", k, m[k], m[fmt.Sprintf(`vllm_server_up{target=%q}`, tg)])
			}
		}
		return true, nil
	}); err != nil {
		t.Error(err)
	}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// failures returns the failure reasons a probe's metrics counted.
func failures(m map[string]float64) []string {
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, "vllm_probe_failures_total") && v > 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// proberSeries reads one series of the prober's /metrics, 0 when absent.
func proberSeries(ctx context.Context, proberURL, series string) (float64, error) {
	m, err := metricsText(ctx, proberURL+"/metrics")
	if err != nil {
		return 0, err
	}
	return m[series], nil
}

// startLlamaProber starts a vllm_prober probing model at u as target "llama"
// every second (timeout 1s) with module "completion" (max_tokens tokens), and
// scraping it every second.
func startLlamaProber(t *testing.T, proberBin, u, model string, maxTokens int) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vllm_prober.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {probe_interval: 1s, scrape_interval: 1s, scrape_timeout: 900ms, rate_window: 10s, probe_timeout: 1s}
modules:
  completion: {prober: completions, prompt: %q, max_tokens: %d, ignore_eos: true}
targets:
  - {name: llama, url: %q, engine: llamacpp, model: %q, modules: [completion], max_num_seqs: 1}
`, llamaPrompt, maxTokens, u, model)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProcess(t, "vllm_prober", proberBin, "--config.file="+cfg, "--web.listen-address="+addr)
	if err := waitReady(t.Context(), p, "http://"+addr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// TestLlamaServerSaturation: one long request holds the only slot of a
// llama-server. The collector reads waiting > 0 (the prober's own probes
// queue behind it), the probes time out, /health stays 200, and on a real
// Prometheus with the mixin's rules VLLMEngineHung fires: the engine is up
// but serves nothing.
func TestLlamaServerSaturation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama-server, vllm_prober and Prometheus for about a minute; skipped with -short")
	}
	bin := llamaServerBin(t)
	promBin := prometheusBinary(t)
	proberBin, _ := binaries(t)
	ctx := t.Context()
	ls := startLlamaServer(t, bin, writeModel(t, gguf.Small()), 1)
	proberURL := startLlamaProber(t, proberBin, ls.url(), "small", 8)
	_, promURL := startPrometheus(t, promBin, t.TempDir(), []string{strings.TrimPrefix(proberURL, "http://")})
	client := &mixin.Client{BaseURL: promURL, HTTP: httpClient}

	if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "a successful probe", func(ctx context.Context) (bool, error) {
		v, err := proberSeries(ctx, proberURL, `vllm_probe_success{model="small",module="completion",target="llama"}`)
		return v == 1, err
	}); err != nil {
		t.Fatal(err)
	}

	// Long requests, back to back: 3500 tokens at 2-10 ms each hold the slot
	// for 7-35 s each, until the test cancels them.
	longCtx, cancelLong := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":3500,"ignore_eos":true,"stream":true}`, llamaPrompt)
		for longCtx.Err() == nil {
			_ = stream(longCtx, http.DefaultClient, ls.url(), body)
		}
	}()
	defer func() { cancelLong(); wg.Wait() }()

	var waiting, timeouts float64
	var health []int
	if err := waitFor(ctx, 15*time.Second, 250*time.Millisecond, "waiting > 0 and probe timeouts", func(ctx context.Context) (bool, error) {
		m, err := metricsText(ctx, proberURL+"/metrics")
		if err != nil {
			return false, err
		}
		waiting = max(waiting, m[`vllm_server_requests{model="small",state="waiting",target="llama"}`])
		timeouts = m[`vllm_probe_failures_total{model="small",module="completion",reason="timeout",target="llama"}`]
		code, err := httpStatus(ctx, ls.url()+"/health")
		health = append(health, code)
		if err != nil {
			return false, err
		}
		return waiting > 0 && timeouts >= 2, nil
	}); err != nil {
		t.Fatalf("%v: waiting max %v, timeouts %v", err, waiting, timeouts)
	}
	for _, c := range health {
		if c != http.StatusOK {
			t.Errorf("/health answered %v during the saturation, want 200 throughout", health)
			break
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	a, err := client.WaitForAlert(wctx, "VLLMEngineHung", map[string]string{"target": "llama"}, 500*time.Millisecond)
	cancel()
	if err != nil {
		s, _ := queryValues(ctx, promURL, `{__name__=~"vllm_probe_failures_total|vllm_probe_attempts_total|vllm_probe_health_up",target="llama"}`)
		t.Errorf("VLLMEngineHung did not fire: %v\nseries: %v", err, s)
	} else {
		t.Logf("VLLMEngineHung fired (value %s) with waiting up to %v and %v probe timeouts, /health 200", a.Value, waiting, timeouts)
	}
	cancelLong()
	wg.Wait()
	if err := waitFor(ctx, 30*time.Second, 500*time.Millisecond, "a successful probe after the long request", func(ctx context.Context) (bool, error) {
		v, err := proberSeries(ctx, proberURL, `vllm_probe_success{model="small",module="completion",target="llama"}`)
		return v == 1, err
	}); err != nil {
		t.Error(err)
	}
}

// TestLlamaServerStopAndRestart: SIGSTOP/SIGCONT and a kill and restart of a
// llama-server read as they do on vllm_sim: probes fail (timeout while it is
// stopped, connection while it is down), the scrape reads down, all recover,
// and the restart's counters at 0 bring no negative or huge rate.
func TestLlamaServerStopAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama-server and vllm_prober for about a minute; skipped with -short")
	}
	bin := llamaServerBin(t)
	proberBin, _ := binaries(t)
	ctx := t.Context()
	ls := startLlamaServer(t, bin, writeModel(t, gguf.Tiny()), 1)
	proberURL := startLlamaProber(t, proberBin, ls.url(), "tiny", 16)
	const (
		success = `vllm_probe_success{model="tiny",module="completion",target="llama"}`
		up      = `vllm_server_up{target="llama"}`
		rate    = `vllm_server_generation_tokens_per_second{model="tiny",target="llama"}`
	)
	reason := func(r string) string {
		return fmt.Sprintf(`vllm_probe_failures_total{model="tiny",module="completion",reason=%q,target="llama"}`, r)
	}
	// Rates are sampled all along, for the spike check.
	var mu sync.Mutex
	var rates []float64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if m, err := metricsText(sampleCtx, proberURL+"/metrics"); err == nil {
				if v, ok := m[rate]; ok {
					mu.Lock()
					rates = append(rates, v)
					mu.Unlock()
				}
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { stopSampling(); wg.Wait() }()

	waitState := func(what string, timeout time.Duration, want map[string]func(float64) bool) {
		t.Helper()
		if err := waitFor(ctx, timeout, 250*time.Millisecond, what, func(ctx context.Context) (bool, error) {
			m, err := metricsText(ctx, proberURL+"/metrics")
			if err != nil {
				return false, err
			}
			for k, ok := range want {
				if !ok(m[k]) {
					return false, fmt.Errorf("%s = %v", k, m[k])
				}
			}
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	eq := func(v float64) func(float64) bool { return func(x float64) bool { return x == v } }
	above := func(v float64) func(float64) bool { return func(x float64) bool { return x > v } }
	waitState("steady probes and scrapes", 30*time.Second, map[string]func(float64) bool{success: eq(1), up: eq(1), rate: above(0)})

	m, err := metricsText(ctx, proberURL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	timeouts, conns := m[reason("timeout")], m[reason("connection")]
	if err := ls.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState("timeouts and a failed scrape while stopped", 20*time.Second, map[string]func(float64) bool{
		success: eq(0), up: eq(0), reason("timeout"): above(timeouts)})
	if err := ls.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitState("recovery after SIGCONT", 20*time.Second, map[string]func(float64) bool{success: eq(1), up: eq(1)})

	mu.Lock()
	before := slices.Max(rates)
	mu.Unlock()
	ls.p.halted = true
	if err := ls.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-ls.p.done
	waitState("connection failures while down", 20*time.Second, map[string]func(float64) bool{
		success: eq(0), up: eq(0), reason("connection"): above(conns)})
	restarted := time.Now()
	ls.start(t)
	waitState("recovery after the restart", 30*time.Second, map[string]func(float64) bool{success: eq(1), up: eq(1), rate: above(0)})
	// Some seconds of rates across the counters' reset to 0.
	time.Sleep(5 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	lo, hi := slices.Min(rates), slices.Max(rates)
	t.Logf("generation rate before the kill up to %.1f tok/s; over the run %.1f-%.1f; restarted %s ago", before, lo, hi, time.Since(restarted).Round(time.Second))
	if lo < 0 || hi > 3*before {
		t.Errorf("generation rate %.1f-%.1f tok/s across the restart, want 0-%.1f (3x the rate before it)", lo, hi, 3*before)
	}
}

// TestLlamaServerBench: vllm_prober bench against llama-server, which closes
// the connection after every streamed response while answering Keep-Alive,
// loses no request and writes its baseline.
func TestLlamaServerBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama-server and vllm_prober bench for about half a minute; skipped with -short")
	}
	bin := llamaServerBin(t)
	proberBin, _ := binaries(t)
	ls := startLlamaServer(t, bin, writeModel(t, gguf.Tiny()), 2)
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), proberBin, "bench", "--url="+ls.url(), "--out="+out, "--name=llama",
		"--concurrency=2", "--requests=60", "--max-tokens=16", "--ignore-eos", "--prompt="+llamaPrompt)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("vllm_prober bench against llama-server: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "llama.baseline.yaml")); err != nil {
		t.Fatalf("no baseline written: %v\n%s", err, b)
	}
	if regexp.MustCompile(`(?i)\b[1-9][0-9]* (failed|errors?)\b`).Match(b) {
		t.Errorf("bench lost requests:\n%s", b)
	}
	t.Logf("%s", b)
}
