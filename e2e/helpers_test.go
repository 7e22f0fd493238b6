package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/mixin"
)

// prometheusBinary returns the Prometheus server to run: $PROMETHEUS when set,
// else the Prometheus 3.x of $E2E_PROMETHEUS3_DIR (set by `make e2e`), else
// prometheus on $PATH. A missing Prometheus fails the test: the proof must
// not pass by skipping.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMETHEUS"); p != "" {
		return p
	}
	// `make e2e` runs the end-to-end tests on the Prometheus 3.x it built
	// (`make test` runs them on Debian's 2.42).
	if d := prometheus3Dir(); d != "" {
		return filepath.Join(d, "prometheus")
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("the end-to-end test needs a Prometheus server and none is on $PATH (%v): "+
			"install Debian's prometheus package (apt-get install prometheus, as .ci/run does), "+
			"set $PROMETHEUS to a prometheus binary, or run go test -short to leave this test out", err)
	}
	return p
}

// binaries returns the paths of vllm_prober and vllm_sim: those in
// $VLLM_PROBER_BIN_DIR when set (e.g. bin/ after make build), else freshly
// built from this checkout into a temporary directory.
func binaries(t *testing.T) (prober, sim string) {
	t.Helper()
	if dir := os.Getenv("VLLM_PROBER_BIN_DIR"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatalf("VLLM_PROBER_BIN_DIR: %v", err)
		}
		return filepath.Join(abs, "vllm_prober"), filepath.Join(abs, "vllm_sim")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build vllm_prober and vllm_sim with, and VLLM_PROBER_BIN_DIR is not set: %v", err)
	}
	dir := t.TempDir()
	for _, name := range []string{"vllm_prober", "vllm_sim"} {
		cmd := exec.CommandContext(t.Context(), goBin, "build", "-o", filepath.Join(dir, name), "../cmd/"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ../cmd/%s: %v\n%s", name, err, out)
		}
	}
	return filepath.Join(dir, "vllm_prober"), filepath.Join(dir, "vllm_sim")
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	return addr
}

// process is a child process whose output goes to a log file. It is stopped
// (SIGTERM, then SIGKILL after 10s) and waited for in t.Cleanup; its log is
// printed when the test failed.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited and been waited for
	err     error         // Wait's result, valid once done is closed
	halted  bool          // stopped by the test on purpose (halt)
}

func startProcess(t *testing.T, name, path string, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, name, nil, path, args...)
}

// startProcessEnv is startProcess with env added to the test's environment.
func startProcessEnv(t *testing.T, name string, env []string, path string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("creating the log of %s: %v", name, err)
	}
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// exited reports whether the process has ended (it never should on its own).
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; its log:\n%s", p.name, p.err, p.logTail())
	default:
		return nil
	}
}

func (p *process) stop(t *testing.T) {
	select {
	case <-p.done:
		if !p.halted {
			t.Errorf("%s had exited before the end of the test: %v", p.name, p.err)
		}
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	if t.Failed() {
		t.Logf("log of %s (%s, last lines):\n%s", p.name, p.logPath, p.logTail())
	}
}

// halt stops the process on purpose before the end of the test.
func (p *process) halt(t *testing.T) {
	p.halted = true
	p.stop(t)
}

func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	const max = 6000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// waitFor polls cond every poll until it returns true, returns an error, or
// timeout passes; the error names what was awaited and cond's last error.
func waitFor(ctx context.Context, timeout, poll time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(poll)
	defer t.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: gave up after %s (last error: %v)", what, timeout, last)
			}
			return fmt.Errorf("waiting for %s: gave up after %s", what, timeout)
		case <-t.C:
		}
	}
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// httpStatus GETs u and returns its status code.
func httpStatus(ctx context.Context, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// waitReady waits until u answers 200 while p runs.
func waitReady(ctx context.Context, p *process, u string, timeout time.Duration) error {
	return waitFor(ctx, timeout, 100*time.Millisecond, p.name+" at "+u, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		code, err := httpStatus(ctx, u)
		if err != nil {
			return false, err
		}
		return code == http.StatusOK, fmt.Errorf("HTTP %d", code)
	})
}

// simConfig POSTs a runtime change to the simulator's /admin/config.
func simConfig(ctx context.Context, simURL, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, simURL+"/admin/config", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST /admin/config %s: %w", body, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /admin/config %s: HTTP %d: %s", body, resp.StatusCode, b)
	}
	return nil
}

// sample is one series of an instant query's result.
type sample struct {
	Labels map[string]string
	Value  float64
}

func (s sample) String() string {
	names := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		if k != "job" && k != "instance" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(s.Labels["__name__"])
	b.WriteByte('{')
	sep := ""
	for _, k := range names {
		if k == "__name__" {
			continue
		}
		fmt.Fprintf(&b, "%s%s=%q", sep, k, s.Labels[k])
		sep = ","
	}
	fmt.Fprintf(&b, "} %.4g", s.Value)
	return b.String()
}

// queryValues runs an instant query returning a vector, with values, for the
// diagnostics the test logs (mixin.Client.Query only counts series).
func queryValues(ctx context.Context, promURL, expr string) ([]sample, error) {
	return queryValuesAt(ctx, promURL, expr, time.Time{})
}

// queryValuesAt is queryValues at instant at (zero: now).
func queryValuesAt(ctx context.Context, promURL, expr string, at time.Time) ([]sample, error) {
	q := url.Values{"query": {expr}}
	if !at.IsZero() {
		q.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	u := promURL + "/api/v1/query?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("querying Prometheus: %w", err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("decoding Prometheus response (HTTP %d): %w", resp.StatusCode, err)
	}
	if env.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, env.Error)
	}
	if env.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", expr, env.Data.ResultType)
	}
	out := make([]sample, 0, len(env.Data.Result))
	for _, r := range env.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %q: %w", expr, s, err)
		}
		out = append(out, sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// timeline records what the test did and which alerts changed state, with
// the time since the stack was up, and prints it at the end.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func newTimeline() *timeline { return &timeline{start: time.Now()} }

func (tl *timeline) add(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%+7.1fs  ", time.Since(tl.start).Seconds())+fmt.Sprintf(format, args...))
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

// alertKey names an alert instance by its name and the labels that tell the
// instances of this test apart (one target, one module, one model).
func alertKey(labels map[string]string) string {
	var parts []string
	for k, v := range labels {
		switch k {
		case "alertname", "alertstate", "job", "instance", "severity", "target", "module", "model", "baseline", "layer":
			continue
		}
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return labels["alertname"]
	}
	return labels["alertname"] + "{" + strings.Join(parts, ",") + "}"
}

// watchAlerts polls Prometheus' alerts every poll and adds every change of
// state (pending, firing, resolved) to tl until ctx is done. The returned
// channel is closed when the goroutine has ended.
func watchAlerts(ctx context.Context, c *mixin.Client, tl *timeline, poll time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		state := map[string]string{}
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			alerts, err := c.Alerts(ctx)
			if err == nil {
				seen := map[string]bool{}
				for _, a := range alerts {
					k := alertKey(a.Labels)
					seen[k] = true
					if state[k] != a.State {
						tl.add("%-8s %s = %s", a.State, k, a.Value)
						state[k] = a.State
					}
				}
				for k := range state {
					if !seen[k] {
						tl.add("%-8s %s", "resolved", k)
						delete(state, k)
					}
				}
			} else if ctx.Err() == nil {
				tl.add("alerts poll failed: %v", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// kvLoad keeps n completion streams in flight against the simulator, each
// client sending its next request as soon as the previous one ends, until
// stop is called.
type kvLoad struct {
	client   *http.Client
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	finished int
	errs     []error
}

// startKVLoad starts n clients. Client i sends prompts of promptTokens tokens
// (the simulator counts 4 bytes a token) and max_tokens between minTokens and
// maxTokens, spread over the clients so that they do not cross KV block
// boundaries in lock-step.
func startKVLoad(ctx context.Context, simURL string, n, promptTokens, minTokens, maxTokens int) *kvLoad {
	ctx, cancel := context.WithCancel(ctx)
	// Keep-alive connections for every client, dropped in stop.
	l := &kvLoad{cancel: cancel, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}}
	for i := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			prompt := fmt.Sprintf("%03d ", i) + strings.Repeat("load", promptTokens-1)
			maxTok := minTokens + (i*7)%(maxTokens-minTokens+1)
			body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"ignore_eos":true,"stream":true}`, prompt, maxTok)
			for ctx.Err() == nil {
				err := stream(ctx, l.client, simURL, body)
				l.mu.Lock()
				if err == nil {
					l.finished++
				} else if ctx.Err() == nil && len(l.errs) < 5 {
					l.errs = append(l.errs, err)
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// stream sends one streaming completion and reads it to the end.
func stream(ctx context.Context, client *http.Client, simURL, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, simURL+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// No client timeout: a request waits in the simulator's queue for as long
	// as saturation lasts; ctx ends it.
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("load request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("load request: HTTP %d", resp.StatusCode)
	}
	s := bufio.NewScanner(resp.Body)
	done := false
	for s.Scan() {
		if s.Text() == "data: [DONE]" {
			done = true
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("reading load stream: %w", err)
	}
	if !done {
		return errors.New("load stream ended without [DONE]")
	}
	return nil
}

// stop cancels every client, waits for them, and returns how many requests
// completed and the first errors other than the cancellation.
func (l *kvLoad) stop() (int, []error) {
	l.cancel()
	l.wg.Wait()
	l.client.CloseIdleConnections()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finished, l.errs
}

// startPrometheus starts a Prometheus that scrapes the vllm_prober replicas at
// proberAddrs every interval and evaluates the mixin's rules generated with
// --for-scale forScale, with its files under dir, and waits until it is ready.
// It returns the process and Prometheus' base URL.
func startPrometheus(t *testing.T, promBin, dir string, proberAddrs []string) (*process, string) {
	t.Helper()
	return startPrometheusSLO(t, promBin, dir, sloFile, proberAddrs)
}

// startPrometheusSLO is startPrometheus with the rules generated from
// another SLO file than mixin/slo.yml.
func startPrometheusSLO(t *testing.T, promBin, dir, sloFile string, proberAddrs []string) (*process, string) {
	t.Helper()
	spec, err := mixin.LoadSpec(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	ruleFiles, err := mixin.Generate(mixin.Options{SLOFile: sloFile, OutDir: filepath.Join(dir, "rules"), ForScale: forScale})
	if err != nil {
		t.Fatal(err)
	}
	promCfg := filepath.Join(dir, "prometheus.yml")
	cfg, err := mixin.PrometheusConfig(spec, proberAddrs, interval, ruleFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(promCfg, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return startPrometheusFile(t, promBin, dir, promCfg)
}

// startPrometheusFile starts a Prometheus with the configuration file
// promCfg, its TSDB under dir, on a free port of 127.0.0.1, and waits until
// it is ready. It returns the process and Prometheus' base URL.
func startPrometheusFile(t *testing.T, promBin, dir, promCfg string) (*process, string) {
	t.Helper()
	promAddr := freeAddr(t)
	promURL := "http://" + promAddr
	prom := startProcess(t, "prometheus", promBin, "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "prometheus-data"), "--web.listen-address="+promAddr)
	if err := waitReady(t.Context(), prom, promURL+"/-/ready", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return prom, promURL
}

// startSim starts vllm_sim with args on a free port of 127.0.0.1 and waits
// until it answers; it returns the process and its address (host:port).
func startSim(t *testing.T, simBin string, args ...string) (*process, string) {
	t.Helper()
	addr := freeAddr(t)
	sim := startProcess(t, "vllm_sim", simBin, append([]string{"--web.listen-address=" + addr}, args...)...)
	if err := waitReady(t.Context(), sim, "http://"+addr+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return sim, addr
}

// startProber writes cfg as dir/vllm_prober.yml and starts vllm_prober on it
// with args on a free port of 127.0.0.1, and waits until it is ready; it
// returns the process and its address (host:port).
func startProber(t *testing.T, proberBin, dir, cfg string, args ...string) (*process, string) {
	t.Helper()
	path := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProcess(t, "vllm_prober", proberBin, append([]string{"--config.file=" + path, "--web.listen-address=" + addr}, args...)...)
	if err := waitReady(t.Context(), p, "http://"+addr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return p, addr
}
