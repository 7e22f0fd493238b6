// Command hostile runs one vllm_prober daemon (a child process: this program
// re-executed) beside the targets an attacker would serve, for -duration:
//
//   - "hostile": a /metrics naming 20,000 models (one of them 2 MiB long) and
//     10,000 finished_reason values, a /v1/models listing the 20,000 models,
//     and 4 MB response headers on every probe and /health answer;
//   - "hostile-gw": a gateway whose answers name their member in an 8 MB
//     header;
//   - "healthy": an in-process vllm_sim, a member of hostile-gw.
//
// It samples the daemon's resident set every second (VmRSS, and VmHWM, the
// kernel's peak, at the end), and at the end checks that every series of the
// healthy target is in /metrics and that its probes and scrapes succeed. It
// fails when the peak passes -max-rss or a healthy series is missing. Only the
// daemon's memory is counted: the hostile servers run in this process.
//
//	go run ./perf/hostile [-duration 3m] [-max-rss 150]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

func main() {
	perfutil.MaybeRunDaemonChild()
	duration := flag.Duration("duration", 3*time.Minute, "how long the daemon runs beside the hostile targets")
	maxRSS := flag.Float64("max-rss", 150, "the daemon's peak resident set allowed, MiB")
	models := flag.Int("models", 20000, "models the hostile /metrics and /v1/models name")
	reasons := flag.Int("reasons", 10000, "finished_reason values of the hostile /metrics")
	headerMB := flag.Int("header-mb", 4, "size of the hostile target's response header, MB")
	memberMB := flag.Int("member-header-mb", 8, "size of the hostile gateway's member header, MB")
	heap := flag.String("heap-profile", "", "write the daemon's heap profile (inuse) here at the end")
	flag.Parse()
	if err := run(*duration, *maxRSS, *models, *reasons, *headerMB<<20, *memberMB<<20, *heap); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

// hostileEngine serves the hostile target.
func hostileEngine(models, reasons, header int) http.Handler {
	long := strings.Repeat("m", 2<<20)
	name := func(i int) string {
		if i == 0 {
			return long
		}
		return fmt.Sprintf("model-%05d", i)
	}
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	for i := range models {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=%q} 1\n", name(i))
	}
	b.WriteString("# TYPE vllm:request_success_total counter\n")
	for r := range reasons {
		fmt.Fprintf(&b, "vllm:request_success_total{engine=\"0\",finished_reason=\"r%05d\",model_name=\"model-00001\"} %d\n", r, r)
	}
	metrics := b.String()
	b.Reset()
	b.WriteString(`{"object":"list","data":[`)
	for i := range models {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%q,"object":"model","max_model_len":4096}`, name(i))
	}
	b.WriteString("]}")
	list := b.String()
	big := strings.Repeat("h", header)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprint(w, metrics)
		case "/v1/models":
			fmt.Fprint(w, list)
		case "/version":
			fmt.Fprint(w, `{"version":"0.11.0"}`)
		default: // probes and /health: headers of header bytes
			w.Header().Set("X-Hostile", big)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"hi\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		}
	})
}

// hostileGateway forwards to member, naming it in a member header of size
// bytes.
func hostileGateway(member http.Handler, size int) http.Handler {
	big := strings.Repeat("s", size)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/completions") {
			w.Header().Set("X-Served-By", big)
		}
		member.ServeHTTP(w, r)
	})
}

// peakRSS reads VmHWM and VmRSS of pid from /proc, in MiB.
func peakRSS(pid int) (hwm, rss float64, err error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, fmt.Errorf("reading the daemon's status: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parsing %s %q: %w", k, v, err)
		}
		if k == "VmHWM" {
			hwm = kb / 1024
		} else {
			rss = kb / 1024
		}
	}
	return hwm, rss, sc.Err()
}

func run(duration time.Duration, maxRSS float64, models, reasons, header, memberHeader int, heap string) error {
	cfg := simulator.DefaultConfig()
	cfg.TTFT, cfg.ITL = 20*time.Millisecond, 5*time.Millisecond
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		return fmt.Errorf("starting the simulator: %w", err)
	}
	defer sim.Close()
	healthy := httptest.NewServer(sim.Handler())
	defer healthy.Close()
	hostile := httptest.NewServer(hostileEngine(models, reasons, header))
	defer hostile.Close()
	gw := httptest.NewServer(hostileGateway(sim.Handler(), memberHeader))
	defer gw.Close()

	config := fmt.Sprintf(`global:
  probe_interval: 2s
  scrape_interval: 2s
  scrape_timeout: 1500ms
modules:
  short: {prober: completions, prompt: "Say hello.", max_tokens: 8}
targets:
  - {name: healthy, url: %s}
  - {name: hostile, url: %s, model: model-00001}
  - name: hostile-gw
    url: %s
    scrape_metrics: false
    gateway: {members: [healthy], member_header: X-Served-By}
`, healthy.URL, hostile.URL, gw.URL)
	dir, err := os.MkdirTemp("", "vllm-prober-hostile-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	d, err := perfutil.StartDaemonWith(dir, config, heap != "")
	if err != nil {
		return err
	}
	defer d.Stop()
	fmt.Print("Hostile targets beside a healthy one\n", perfutil.Machine())
	fmt.Printf("hostile: %d models (one 2 MiB long), %d finished reasons, %d MB headers on probes and /health; hostile-gw: %d MB member header; healthy: vllm_sim; probe and scrape every 2s, %s\n\n",
		models, reasons, header>>20, memberHeader>>20, duration)
	start := time.Now()
	peak := 0.0
	fmt.Printf("%8s %10s %8s\n", "t", "rss-MiB", "load1")
	for next := start; time.Since(start) <= duration; time.Sleep(time.Second) {
		_, rss, err := peakRSS(d.Pid())
		if err != nil {
			return err
		}
		peak = max(peak, rss)
		if time.Now().After(next) {
			fmt.Printf("%8s %10.1f %8.2f\n", time.Since(start).Round(time.Second), rss, perfutil.Load1())
			next = next.Add(15 * time.Second)
		}
	}
	hwm, _, err := peakRSS(d.Pid())
	if err != nil {
		return err
	}
	if heap != "" {
		if err := d.Profile("heap", "", heap); err != nil {
			return err
		}
	}
	// A failure reason's first exposition renders 0 (prober/metrics.go): the
	// second shows the counts.
	var body []byte
	for range 2 {
		if _, body, err = perfutil.ScrapeAs(d.URL+"/metrics", perfutil.AcceptText); err != nil {
			return err
		}
	}
	var problems []string
	want := []string{
		`vllm_probe_success{model="` + cfg.Model + `",module="short",target="healthy"} 1`,
		`vllm_server_up{target="healthy"} 1`,
		`vllm_server_requests{model="` + cfg.Model + `",state="running",target="healthy"}`,
		`vllm_server_time_to_first_token_seconds{model="` + cfg.Model + `",stat="mean",target="healthy"}`,
		`vllm_probe_health_up{model="` + cfg.Model + `",target="healthy"} 1`,
		`vllm_probe_success{model="` + cfg.Model + `",module="short",target="hostile-gw"} 0`,
	}
	text := string(body)
	for _, w := range want {
		if !strings.Contains(text, w) {
			problems = append(problems, "missing: "+w)
		}
	}
	series, healthySeries, maxLine := 0, 0, 0
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		series++
		maxLine = max(maxLine, len(line))
		if strings.Contains(line, `target="healthy"`) {
			healthySeries++
		}
	}
	fmt.Printf("\npeak RSS %.1f MiB sampled, VmHWM %.1f MiB (limit %.0f MiB); /metrics: %d bytes, %d series (%d of the healthy target), longest line %d bytes\n",
		peak, hwm, maxRSS, len(body), series, healthySeries, maxLine)
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "vllm_probe_failures_total{") {
			fmt.Print("  ", line)
		}
	}
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "vllm_prober_scrape_values_dropped_total") {
			fmt.Print("  ", line)
		}
	}
	if hwm > maxRSS {
		problems = append(problems, fmt.Sprintf("the daemon's peak resident set %.1f MiB passed %.0f MiB", hwm, maxRSS))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	fmt.Println("verdict: BOUNDED (peak within the limit, every healthy series there)")
	return nil
}
