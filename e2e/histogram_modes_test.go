package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
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

	"github.com/vllm-prober/vllm_prober/internal/testtool"
	"github.com/vllm-prober/vllm_prober/mixin"
)

// promServer is one Prometheus of the histogram-mode run.
type promServer struct {
	name  string // "2.42.0 native"
	major int
	mode  mixin.HistogramMode
	proc  *process
	url   string
	c     *mixin.Client
	// nativeOnly: it scrapes the vllm_prober run with histograms: native,
	// whose probes run at other moments than the first prober's.
	nativeOnly bool
}

// prometheusVersion runs bin --version and returns its version ("3.15.0") and major version.
func prometheusVersion(t *testing.T, bin string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	m := regexp.MustCompile(`version (\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("%s --version printed no version:\n%s", bin, out)
	}
	major, _ := strconv.Atoi(m[1])
	return m[1] + "." + m[2] + "." + m[3], major
}

// prometheus3Dir is the directory of the Prometheus 3.x build that `make e2e`
// exports (scripts/e2e-tools.sh prometheus3), or "".
func prometheus3Dir() string { return os.Getenv("E2E_PROMETHEUS3_DIR") }

// TestHistogramModesAgree runs the mixin on Prometheus 2.42 (Debian's) and 3.x
// (built by scripts/e2e-tools.sh) side by side, in every histogram mode each
// supports: 2.42 classic and native (--enable-feature=native-histograms), 3.x
// classic, native (scrape_native_histograms: true) and NHCB
// (convert_classic_histograms_to_nhcb: true). One vllm_sim, probed by one
// vllm_prober that exposes its latency histograms with classic and native
// buckets (native_histogram_bucket_factor: 1.1), is scraped by all five, and a
// second vllm_prober of the same simulator with global.histograms: native (no
// classic buckets at all) by one more native-mode server per version; they
// load the very same rule files, so their rule groups evaluate at the same
// offsets. It checks that:
//   - each mode took effect (no _bucket series in native and NHCB modes, a
//     native histogram under the bare name instead);
//   - every dashboard query that returns data on 2.42 classic returns data on
//     every server;
//   - the SLI recording rules agree across servers;
//   - when the simulator's time to first token crosses the 2s TTFT threshold,
//     VLLMTTFTBudgetBurn becomes active in every histogram mode of a version
//     within one evaluation interval (across 2.42 and 3.x, whose range
//     selectors differ at the window's left edge, within two), and resolves
//     everywhere once TTFT is back.
//
// It needs Prometheus 3.x: `make e2e` builds it and sets E2E_PROMETHEUS3_DIR;
// without it the test skips, saying so.
func TestHistogramModesAgree(t *testing.T) {
	p3 := prometheus3Dir()
	if p3 == "" {
		testtool.Skip(t, "Prometheus 3.x (E2E_PROMETHEUS3_DIR)", "make e2e builds it once with scripts/e2e-tools.sh prometheus3")
	}
	p2, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("Prometheus 2.x (Debian's prometheus package) is not on PATH: %v", err)
	}
	ctx := t.Context()
	dir := t.TempDir()
	started := time.Now()
	proberBin, simBin := binaries(t)

	simAddr := freeAddr(t)
	simURL := "http://" + simAddr
	sim := startProcess(t, "vllm_sim", simBin, "--web.listen-address="+simAddr, "--model="+simModel,
		"--ttft=150ms", "--itl=20ms")
	if err := waitReady(ctx, sim, simURL+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	proberCfg := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(proberCfg, []byte(fmt.Sprintf(`global:
  probe_interval: 3s
  probe_timeout: 3s
  scrape_interval: 1s
  scrape_timeout: 900ms
  native_histogram_bucket_factor: 1.1
modules:
  completion:
    prober: completions
    prompt: %q
    max_tokens: 4
    ignore_eos: true
targets:
  - name: sim
    url: %s
    model: %s
    modules: [completion]
`, probePrompt, simURL, simModel)), 0o644); err != nil {
		t.Fatal(err)
	}
	proberAddr := freeAddr(t)
	prober := startProcess(t, "vllm_prober", proberBin, "--config.file="+proberCfg, "--web.listen-address="+proberAddr)
	if err := waitReady(ctx, prober, "http://"+proberAddr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// A second vllm_prober of the same simulator exposes native histograms
	// only (global.histograms: native), for the native-mode servers.
	nativeCfg := filepath.Join(dir, "vllm_prober_native.yml")
	cfgText, err := os.ReadFile(proberCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nativeCfg, []byte(strings.Replace(string(cfgText), "native_histogram_bucket_factor: 1.1", "histograms: native", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	nativeAddr := freeAddr(t)
	nativeProber := startProcess(t, "vllm_prober native", proberBin, "--config.file="+nativeCfg, "--web.listen-address="+nativeAddr)
	if err := waitReady(ctx, nativeProber, "http://"+nativeAddr+"/-/ready", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// One set of rule files for every server: the same paths give the same
	// rule-group evaluation offsets.
	ruleFiles, err := mixin.Generate(mixin.Options{SLOFile: sloFile, OutDir: filepath.Join(dir, "rules"), ForScale: forScale})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := mixin.LoadSpec(sloFile)
	if err != nil {
		t.Fatal(err)
	}
	var servers []*promServer
	for _, bin := range []string{p2, filepath.Join(p3, "prometheus")} {
		version, major := prometheusVersion(t, bin)
		for _, sm := range []struct {
			mode       mixin.HistogramMode
			nativeOnly bool
		}{{mixin.HistogramClassic, false}, {mixin.HistogramNative, false}, {mixin.HistogramNHCB, false}, {mixin.HistogramNative, true}} {
			mode := sm.mode
			if mode == mixin.HistogramNHCB && major < 3 {
				continue
			}
			name, scraped := version+" "+string(mode), proberAddr
			if sm.nativeOnly {
				name, scraped = version+" native-only-prober", nativeAddr
			}
			sdir := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.MkdirAll(sdir, 0o755); err != nil {
				t.Fatal(err)
			}
			cfg, err := mixin.PrometheusConfigMode(spec, []string{scraped}, interval, ruleFiles, mode, major)
			if err != nil {
				t.Fatal(err)
			}
			cfgFile := filepath.Join(sdir, "prometheus.yml")
			if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			addr := freeAddr(t)
			args := append([]string{"--config.file=" + cfgFile, "--storage.tsdb.path=" + filepath.Join(sdir, "data"),
				"--web.listen-address=" + addr}, mixin.PrometheusFlags(mode, major)...)
			s := &promServer{name: name, major: major, mode: mode, url: "http://" + addr, nativeOnly: sm.nativeOnly}
			s.proc = startProcess(t, "prometheus "+name, bin, args...)
			s.c = &mixin.Client{BaseURL: s.url, HTTP: httpClient}
			servers = append(servers, s)
		}
	}
	for _, s := range servers {
		if err := waitReady(ctx, s.proc, s.url+"/-/ready", 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d Prometheus servers: %s", len(servers), serverNames(servers))

	// Warm-up: every server has the SLIs.
	for _, s := range servers {
		if err := waitFor(ctx, 90*time.Second, 500*time.Millisecond, s.name+" SLIs", func(ctx context.Context) (bool, error) {
			n, err := s.c.Query(ctx, `target_module:vllm_probe_ttft_within_slo:ratio_rate1h`)
			return n > 0, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Let the shortest SLI window (5m scaled: 5s) fill with probes everywhere.
	time.Sleep(6 * time.Second)

	t.Run("each mode took effect", func(t *testing.T) {
		for _, s := range servers {
			buckets, err := s.c.Query(ctx, `vllm_probe_time_to_first_token_seconds_bucket`)
			if err != nil {
				t.Fatal(err)
			}
			native, err := s.c.Query(ctx, `histogram_count(vllm_probe_time_to_first_token_seconds)`)
			if err != nil {
				t.Fatal(err)
			}
			wantClassic := s.mode == mixin.HistogramClassic
			if (buckets > 0) != wantClassic || (native > 0) == wantClassic {
				t.Errorf("%s: %d _bucket series and %d native histograms; want classic series only in classic mode, a native histogram only otherwise",
					s.name, buckets, native)
			}
		}
	})

	t.Run("every dashboard query returns data in every mode", func(t *testing.T) {
		qs, err := mixin.DashboardQueries(dashboardsDir, rateInterval)
		if err != nil {
			t.Fatal(err)
		}
		ref, checked := servers[0], 0
		for _, q := range qs {
			n, err := ref.c.Query(ctx, q.Expr)
			if err != nil {
				t.Errorf("%s: %s / %s: %v", ref.name, q.Dashboard, q.Panel, err)
				continue
			}
			if n == 0 {
				continue // no data in the reference either (an alert panel, a baseline panel without baseline)
			}
			checked++
			for _, s := range servers[1:] {
				if m, err := s.c.Query(ctx, q.Expr); err != nil || m == 0 {
					t.Errorf("%s: %s / %s returns no data (%d series on %s, error %v): %s", s.name, q.Dashboard, q.Panel, n, ref.name, err, q.Expr)
				}
			}
		}
		if checked < 20 {
			t.Errorf("only %d dashboard queries returned data on %s", checked, ref.name)
		}
		t.Logf("%d dashboard queries with data on %s returned data on the %d other servers", checked, ref.name, len(servers)-1)
	})

	t.Run("SLI recording rules agree", func(t *testing.T) {
		// One instant, a few seconds back, so every server has evaluated it.
		at := time.Now().Add(-3 * time.Second)
		for _, rule := range []string{
			"target_module:vllm_probe_ttft_within_slo:ratio_rate1h",
			"target_module:vllm_probe_e2e_within_slo:ratio_rate1h",
			"target_module:vllm_probe_success:ratio_rate1h",
			"target_module:vllm_probe_ttft_over_slo:increase1h",
		} {
			var vals []string
			var first float64
			for i, s := range servers {
				v, err := scalarAt(ctx, s, rule, at)
				if err != nil {
					t.Errorf("%s: %s: %v", s.name, rule, err)
					continue
				}
				vals = append(vals, fmt.Sprintf("%s=%.4g", s.name, v))
				if i == 0 {
					first = v
				} else if math.Abs(v-first) > 0.02*math.Max(1, math.Abs(first)) {
					t.Errorf("%s: %s = %v, %s = %v", rule, s.name, v, servers[0].name, first)
				}
			}
			t.Logf("%s: %s", rule, strings.Join(vals, ", "))
		}
	})

	t.Run("TTFT over 2s fires VLLMTTFTBudgetBurn in every mode at the same time", func(t *testing.T) {
		if err := simConfig(ctx, simURL, `{"ttft":"2200ms"}`); err != nil {
			t.Fatal(err)
		}
		match := map[string]string{"target": "sim", "long_window": "1h"}
		activeAt := map[string]time.Time{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, s := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
				defer cancel()
				at, err := waitActive(wctx, s, "VLLMTTFTBudgetBurn", match, false)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("%s: %v", s.name, err)
					return
				}
				activeAt[s.name] = at
			}()
		}
		wg.Wait()
		if len(activeAt) == len(servers) {
			var ts []time.Time
			var desc []string
			for _, s := range servers {
				// The native-only prober probes at other moments: it must
				// fire too, but its timing is not the histogram mode's.
				if !s.nativeOnly {
					ts = append(ts, activeAt[s.name])
				}
				desc = append(desc, fmt.Sprintf("%s %s", s.name, activeAt[s.name].Format("15:04:05.000")))
			}
			spread := slices.MaxFunc(ts, time.Time.Compare).Sub(slices.MinFunc(ts, time.Time.Compare))
			t.Logf("VLLMTTFTBudgetBurn{long_window=1h} active since: %s; spread %s (evaluation interval %s)",
				strings.Join(desc, ", "), spread, interval)
			// Across the histogram modes of one Prometheus version: within one
			// evaluation interval. Across versions the range selectors differ
			// (3.x excludes the window's left edge), so a burn can cross the
			// threshold one evaluation apart: within two.
			for _, major := range []int{2, 3} {
				var vs []time.Time
				for _, s := range servers {
					if s.major == major && !s.nativeOnly {
						vs = append(vs, activeAt[s.name])
					}
				}
				if d := slices.MaxFunc(vs, time.Time.Compare).Sub(slices.MinFunc(vs, time.Time.Compare)); d > interval {
					t.Errorf("Prometheus %d.x: VLLMTTFTBudgetBurn became active %s apart across histogram modes, more than one evaluation interval (%s)", major, d, interval)
				}
			}
			if spread > 2*interval {
				t.Errorf("VLLMTTFTBudgetBurn became active %s apart across servers, more than two evaluation intervals (%s)", spread, interval)
			}
		}
		if err := simConfig(ctx, simURL, `{"ttft":"150ms"}`); err != nil {
			t.Fatal(err)
		}
		// The 1h row resolves once its short window (5m, scaled to 5s) is clean;
		// observed by polling every 100ms, so the spread allows one poll more.
		goneAt := map[string]time.Time{}
		for _, s := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
				defer cancel()
				err := waitFor(wctx, 120*time.Second, 100*time.Millisecond, "VLLMTTFTBudgetBurn{long_window=1h} to resolve on "+s.name,
					func(ctx context.Context) (bool, error) {
						_, err := waitActive(ctx, s, "VLLMTTFTBudgetBurn", match, true)
						if errors.Is(err, errNotActive) {
							return true, nil
						}
						return false, err
					})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("%s: %v", s.name, err)
					return
				}
				goneAt[s.name] = time.Now()
			}()
		}
		wg.Wait()
		if len(goneAt) == len(servers) {
			var ts []time.Time
			for _, s := range servers {
				if !s.nativeOnly {
					ts = append(ts, goneAt[s.name])
				}
			}
			spread := slices.MaxFunc(ts, time.Time.Compare).Sub(slices.MinFunc(ts, time.Time.Compare))
			t.Logf("VLLMTTFTBudgetBurn{long_window=1h} resolved on every server within %s (observed by polling every 100ms)", spread)
			for _, major := range []int{2, 3} {
				var vs []time.Time
				for _, s := range servers {
					if s.major == major && !s.nativeOnly {
						vs = append(vs, goneAt[s.name])
					}
				}
				if d := slices.MaxFunc(vs, time.Time.Compare).Sub(slices.MinFunc(vs, time.Time.Compare)); d > interval+200*time.Millisecond {
					t.Errorf("Prometheus %d.x: VLLMTTFTBudgetBurn resolved %s apart across histogram modes, more than one evaluation interval (%s) and a poll", major, d, interval)
				}
			}
			if spread > 2*interval+200*time.Millisecond {
				t.Errorf("VLLMTTFTBudgetBurn resolved %s apart across servers, more than two evaluation intervals (%s) and a poll", spread, interval)
			}
		}
	})

	for _, p := range []*process{sim, prober} {
		if err := p.exited(); err != nil {
			t.Error(err)
		}
	}
	t.Logf("histogram-mode run took %s", time.Since(started).Round(time.Second))
}

func serverNames(ss []*promServer) string {
	n := make([]string, len(ss))
	for i, s := range ss {
		n[i] = s.name
	}
	return strings.Join(n, ", ")
}

// scalarAt evaluates expr (one series) on s at t.
func scalarAt(ctx context.Context, s *promServer, expr string, t time.Time) (float64, error) {
	vs, err := queryValues(ctx, s.url, fmt.Sprintf("%s @ %d", expr, t.Unix()))
	if err != nil {
		return 0, err
	}
	if len(vs) != 1 {
		return 0, fmt.Errorf("%d series, want 1: %v", len(vs), vs)
	}
	return vs[0].Value, nil
}

// errNotActive is waitActive's answer, with once set, when the alert is not active.
var errNotActive = errors.New("alert not active")

// waitActive waits until an alert named name matching labels is pending or
// firing on s and returns its activeAt. With once, it looks once and returns
// errNotActive when there is no such alert.
func waitActive(ctx context.Context, s *promServer, name string, labels map[string]string, once bool) (time.Time, error) {
	var at time.Time
	look := func(ctx context.Context) (bool, error) {
		alerts, err := s.c.Alerts(ctx)
		if err != nil {
			return false, err
		}
		for _, a := range alerts {
			if a.Labels["alertname"] != name {
				continue
			}
			ok := true
			for k, v := range labels {
				ok = ok && a.Labels[k] == v
			}
			if ok && !a.ActiveAt.IsZero() {
				at = a.ActiveAt
				return true, nil
			}
		}
		return false, nil
	}
	if once {
		ok, err := look(ctx)
		if err == nil && !ok {
			err = errNotActive
		}
		return at, err
	}
	err := waitFor(ctx, time.Until(deadlineOf(ctx)), 100*time.Millisecond, name+" on "+s.name, look)
	return at, err
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}
