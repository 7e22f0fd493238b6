// Command footprint prints figure P2 of docs/performance.md: the footprint of
// one vllm_prober with -targets targets (spread over -sims in-process vllm_sim
// servers, each serving many target names), probing every 30 s and scraping
// every 15 s. The daemon runs in a child process (this program re-executed), so
// its CPU seconds per minute, RSS and goroutines are its own; the simulators
// run in this process. After a warm-up of one probe interval (every pair has
// probed once) it samples the child every -sample for -duration and reports
// CPU seconds per minute, peak RSS, goroutines and the time to render /metrics.
//
// With -shards N it starts N daemon children with the same configuration, as
// the replicas of a sharded deployment (--shard.count N, --shard.index 0 to
// N-1): together they probe every target once, and it reports each replica's
// figures, the worst replica's against the targets, and the fleet's CPU.
//
// With -baselines it measures instead the /metrics render with every target
// baselined against the render without, at each of -sizes targets, in the
// same run (baselines.go).
//
//	go run ./perf/footprint [-targets 1000] [-duration 2m] [-shards 1]
//	go run ./perf/footprint -baselines [-sizes 100,300,1000]
//	go run ./perf/footprint -floor [-distinct] [-targets 1000]
//
// With -floor it measures, instead of the daemon, a client that makes the
// same requests and decodes nothing: the floor of any prober (floor.go).
//
// With -distinct every target has a host:port of its own (127.0.x.y), as in a
// real fleet, instead of sharing -sims; the goroutines and sockets per target
// then show what one connection pool per distinct http_client_config costs.
// With -floor -distinct the floor child holds a connection pool per target
// too, as the daemon must when every pod is its own host: the honest floor.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/internal/shard"
	"github.com/vllm-prober/vllm_prober/internal/simulator"
	"github.com/vllm-prober/vllm_prober/perf/internal/perfutil"
)

func main() {
	perfutil.MaybeRunDaemonChild()
	maybeRunFloorChild()
	targets := flag.Int("targets", 1000, "targets")
	sims := flag.Int("sims", 4, "simulators serving the targets")
	shards := flag.Int("shards", 1, "daemon replicas the targets are sharded over (--shard.count)")
	duration := flag.Duration("duration", 2*time.Minute, "measurement time after the warm-up")
	warmup := flag.Duration("warmup", 35*time.Second, "warm-up before measuring (one probe interval)")
	sample := flag.Duration("sample", 10*time.Second, "sampling period")
	profileDir := flag.String("profile", "", "when set, write the daemon's CPU (over the measurement), heap and goroutine profiles to this directory (replica 0's with -shards)")
	memLimit := flag.String("gomemlimit", "", "when set, the daemon child's GOMEMLIMIT (e.g. 128MiB): trades GC CPU for RSS")
	maxProcs := flag.Int("gomaxprocs", 0, "when > 0, the daemon child's GOMAXPROCS")
	distinct := flag.Bool("distinct", false, "give every target a host:port of its own (127.0.x.y on one simulator's port) instead of sharing -sims host:ports")
	baselines := flag.Bool("baselines", false, "measure the /metrics render with every target baselined against without, at each of -sizes")
	sizes := flag.String("sizes", "100,300,1000", "with -baselines: the fleet sizes")
	interval := flag.Duration("baselines.interval", 2*time.Second, "with -baselines: the shortest probe interval (the histories fill in history+1 intervals)")
	rate := flag.Float64("baselines.rate", 40, "with -baselines: probes per second per daemon (the interval grows with the fleet)")
	history := flag.Int("baselines.history", 5, "with -baselines: the daemon's --history.limit")
	samples := flag.Int("baselines.samples", 10, "with -baselines: /metrics renders timed per daemon")
	floor := flag.Bool("floor", false, "measure instead a client that makes the same requests and decodes nothing (floor.go)")
	flag.Parse()
	if *floor {
		if err := floorRun(*targets, *sims, *distinct, *duration, *warmup, *sample); err != nil {
			fmt.Fprintln(os.Stderr, "footprint:", err)
			os.Exit(1)
		}
		return
	}
	if *baselines {
		ns, err := parseSizes(*sizes)
		if err == nil {
			err = baselineRun(ns, *sims, *interval, *rate, *history, *samples)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "footprint:", err)
			os.Exit(1)
		}
		return
	}
	var env []string
	if *memLimit != "" {
		env = append(env, "GOMEMLIMIT="+*memLimit)
	}
	if *maxProcs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", *maxProcs))
	}
	if err := run(*targets, *sims, *shards, *distinct, *duration, *warmup, *sample, *profileDir, env); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

// replica is one daemon child and what was sampled of it.
type replica struct {
	d          *perfutil.Daemon
	targets    int
	p0, prev   perfutil.ProcStat
	prevT      time.Time
	renders    []float64
	peakRSS    int64
	maxG, size int
	cpuPerMin  float64 // over the whole measurement
	lastPerMin float64 // over the last sample period
	lastRSS    int64
	lastG      int
	maxSockets int     // open sockets of the daemon (listener, connections)
	probes0    float64 // vllm_probe_attempts_total at the start of the measurement
	probes     float64 // probes started during the measurement
}

// targetURLs returns the URL of the i-th target: the simulators' in turn,
// or with distinct a host:port of its own on the first simulator's port.
func targetURLs(urls []string, distinct bool) func(i int) string {
	if !distinct {
		return func(i int) string { return urls[i%len(urls)] }
	}
	port := urls[0][strings.LastIndexByte(urls[0], ':')+1:]
	return func(i int) string { return fmt.Sprintf("http://127.0.%d.%d:%s", 1+i/250, 1+i%250, port) }
}

func run(targets, sims, shards int, distinct bool, duration, warmup, sample time.Duration, profileDir string, env []string) error {
	if err := shard.Validate(shards, 0); err != nil {
		return err
	}
	if profileDir != "" {
		// Fail now, not after the warm-up.
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			return fmt.Errorf("profile directory: %w", err)
		}
	}
	if distinct {
		sims = 1
	}
	urls, stop, err := startSims(sims, distinct)
	if err != nil {
		return err
	}
	defer stop()
	targetURL := targetURLs(urls, distinct)
	var b strings.Builder
	b.WriteString(`global:
  probe_interval: 30s
  scrape_interval: 15s
modules:
  short:
    prober: completions
    prompt: "Let's explore some architecture patterns for microservices"
targets:
`)
	names := make([]config.Target, targets)
	for i := range targets {
		names[i].Name = fmt.Sprintf("t%04d", i)
		fmt.Fprintf(&b, "  - name: %s\n    url: %s\n    model: %s\n", names[i].Name, targetURL(i), simulator.DefaultConfig().Model)
	}
	dir, err := os.MkdirTemp("", "vllm-prober-p2-")
	if err != nil {
		return fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	replicas := make([]*replica, shards)
	for i := range replicas {
		rdir := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(rdir, 0o700); err != nil {
			return fmt.Errorf("creating a temporary directory: %w", err)
		}
		renv := env
		if shards > 1 {
			renv = append(slices.Clone(env), fmt.Sprintf("%s=%d/%d", perfutil.ShardEnv, i, shards))
		}
		d, err := perfutil.StartDaemonWith(rdir, b.String(), profileDir != "" && i == 0, renv...)
		if err != nil {
			return err
		}
		defer d.Stop()
		replicas[i] = &replica{d: d, targets: len(shard.Targets(names, shards, i))}
	}

	fmt.Print("P2 footprint\n", perfutil.Machine())
	hosts := fmt.Sprintf("%d simulators", sims)
	if distinct {
		hosts = fmt.Sprintf("%d distinct host:ports", targets)
	}
	fmt.Printf("targets=%d over %s, 1 module (max_tokens 64), probe_interval 30s, scrape_interval 15s; warm-up %s, measured %s",
		targets, hosts, warmup, duration)
	if shards > 1 {
		fmt.Printf("; %d replicas (--shard.count %d), %d to %d targets each", shards, shards,
			slices.MinFunc(replicas, byTargets).targets, slices.MaxFunc(replicas, byTargets).targets)
	}
	if len(env) > 0 {
		fmt.Printf("; daemon %s", strings.Join(env, " "))
	}
	fmt.Print("\n\n")
	time.Sleep(warmup)
	for _, r := range replicas {
		if r.probes0, err = r.d.Sum("vllm_probe_attempts_total"); err != nil {
			return err
		}
	}
	t0 := time.Now()
	for _, r := range replicas {
		if r.p0, err = perfutil.ReadProc(r.d.Pid()); err != nil {
			return err
		}
		r.prev, r.prevT = r.p0, t0
	}
	cpuProfile := make(chan error, 1)
	if profileDir != "" {
		go func() {
			secs := max(int(duration.Seconds())-5, 1)
			cpuProfile <- replicas[0].d.Profile("profile", fmt.Sprintf("seconds=%d", secs), filepath.Join(profileDir, "cpu.pprof"))
		}()
	}
	worst := ""
	if shards > 1 {
		worst = " (worst replica)"
	}
	fmt.Printf("%8s %12s %10s %11s %12s %8s%s\n", "t", "cpu-s/min", "rss-MiB", "goroutines", "render-ms", "load1", worst)
	for time.Since(t0) < duration {
		time.Sleep(sample)
		for _, r := range replicas {
			if err := r.sample(); err != nil {
				return err
			}
		}
		fmt.Printf("%8s %12.3f %10.1f %11d %12.1f %8.2f\n", time.Since(t0).Round(time.Second),
			maxOf(replicas, func(r *replica) float64 { return r.lastPerMin }),
			maxOf(replicas, func(r *replica) float64 { return float64(r.lastRSS) })/(1<<20),
			int(maxOf(replicas, func(r *replica) float64 { return float64(r.lastG) })),
			maxOf(replicas, func(r *replica) float64 { return r.renders[len(r.renders)-1] }), perfutil.Load1())
	}
	if profileDir != "" {
		if err := <-cpuProfile; err != nil {
			return err
		}
		for _, name := range []string{"heap", "goroutine", "allocs"} {
			if err := replicas[0].d.Profile(name, "", filepath.Join(profileDir, name+".pprof")); err != nil {
				return err
			}
		}
		fmt.Printf("profiles written to %s\n", profileDir)
	}
	for _, r := range replicas {
		p1, err := r.d.Sum("vllm_probe_attempts_total")
		if err != nil {
			return err
		}
		r.probes = p1 - r.probes0
	}
	probeWindow := time.Since(t0)
	median := func(r *replica) float64 { return perfutil.Median(slices.Clone(r.renders)) }
	fleetCPU := 0.0
	for _, r := range replicas {
		r.cpuPerMin = (r.prev.CPU - r.p0.CPU).Seconds() / r.prevT.Sub(t0).Minutes()
		fleetCPU += r.cpuPerMin
		_, r.size, _, _ = r.d.Scrape()
	}
	if shards > 1 {
		fmt.Printf("\n%7s %8s %10s %8s %13s %13s %12s\n", "replica", "targets", "cpu-s/min", "%core", "rss-peak-MiB", "render-median", "render-max")
		for i, r := range replicas {
			fmt.Printf("%7d %8d %10.2f %7.2f%% %13.1f %10.1f ms %9.1f ms\n", i, r.targets, r.cpuPerMin, r.cpuPerMin/60*100,
				float64(r.peakRSS)/(1<<20), median(r), slices.Max(r.renders))
		}
		fmt.Printf("\nfleet: %.2f s/min = %.2f%% of one core for %d targets; the worst replica:\n", fleetCPU, fleetCPU/60*100, targets)
	}
	cpu := maxOf(replicas, func(r *replica) float64 { return r.cpuPerMin })
	fmt.Printf("\nCPU: %.2f s/min = %.2f%% of one core (target < 5%%)\n", cpu, cpu/60*100)
	fmt.Printf("RSS peak: %.1f MiB (target < 128 MiB)\n", maxOf(replicas, func(r *replica) float64 { return float64(r.peakRSS) })/(1<<20))
	maxG := maxOf(replicas, func(r *replica) float64 { return float64(r.maxG) })
	maxS := maxOf(replicas, func(r *replica) float64 { return float64(r.maxSockets) })
	perReplica := float64(slices.MaxFunc(replicas, byTargets).targets)
	fmt.Printf("goroutines max: %d (%.2f per target)\n", int(maxG), maxG/perReplica)
	fmt.Printf("sockets max: %d (%.2f per target)\n", int(maxS), maxS/perReplica)
	slow := slices.MaxFunc(replicas, func(a, b *replica) int { return cmp.Compare(median(a), median(b)) })
	fmt.Printf("/metrics render: median %.1f ms, max %.1f ms over %d scrapes, %d bytes (target < 100 ms)\n",
		median(slow), slices.Max(slow.renders), len(slow.renders), slow.size)
	big := slices.MaxFunc(replicas, byTargets)
	fmt.Printf("per target (%d targets): CPU %.2f ms/min, RSS peak %.1f KiB\n", big.targets,
		big.cpuPerMin*1000/float64(big.targets), float64(big.peakRSS)/1024/float64(big.targets))
	// A daemon starved of CPU by other processes does less work, and so
	// uses less CPU: the probes it started tell.
	scheduled := float64(big.targets) * probeWindow.Seconds() / 30
	fmt.Printf("probes started in the %s after the warm-up: %.0f, %.0f%% of the %.0f scheduled (probe_interval 30s)\n",
		probeWindow.Round(time.Second), big.probes, 100*big.probes/scheduled, scheduled)
	return exposition(big.d.URL+"/metrics", names[0].Name, "short")
}

// exposition prints the size of the /metrics body as Prometheus asks for it
// in each format, and the series of one (target, module) pair.
func exposition(url, target, module string) error {
	bodies, text, err := perfutil.Bodies(url)
	if err != nil {
		return err
	}
	for _, f := range []string{"text", "openmetrics", "protobuf"} {
		b := bodies[f]
		fmt.Printf("body %-11s %10d bytes gzip, %10d plain (%s)\n", f, b.Gzip, b.Plain, b.Format)
	}
	pair, perTarget, err := perfutil.PairSeries(text, target, module)
	if err != nil {
		return err
	}
	fmt.Printf("series of the pair (%s, %s) in text: %d; of the target without a module: %d\n",
		target, module, perfutil.Sum(pair), perfutil.Sum(perTarget))
	for _, m := range []map[string]int{pair, perTarget} {
		keys := slices.Sorted(maps.Keys(m))
		for _, k := range keys {
			fmt.Printf("  %4d %s\n", m[k], k)
		}
	}
	return nil
}

// sample reads the replica's CPU and RSS and times a scrape of its /metrics.
func (r *replica) sample() error {
	p, err := perfutil.ReadProc(r.d.Pid())
	if err != nil {
		return err
	}
	now := time.Now()
	took, _, g, err := r.d.Scrape()
	if err != nil {
		return err
	}
	r.renders = append(r.renders, float64(took.Microseconds())/1000)
	r.lastPerMin = (p.CPU - r.prev.CPU).Seconds() / now.Sub(r.prevT).Minutes()
	r.lastRSS, r.lastG = p.RSS, g
	r.peakRSS, r.maxG = max(r.peakRSS, p.RSS), max(r.maxG, g)
	r.maxSockets = max(r.maxSockets, sockets(r.d.Pid()))
	r.prev, r.prevT = p, now
	return nil
}

// startSims starts n in-process simulators (TTFT 20 ms, ITL 5 ms) and returns
// their URLs and a function that stops them. With anyAddr they listen on
// every address, so that each 127.0.x.y reaches them.
func startSims(n int, anyAddr bool) (urls []string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for range n {
		cfg := simulator.DefaultConfig()
		cfg.TTFT, cfg.ITL = 20*time.Millisecond, 5*time.Millisecond
		sim, err := simulator.New(cfg, log.NewNopLogger())
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("starting a simulator: %w", err)
		}
		stops = append(stops, func() { _ = sim.Close() })
		srv := httptest.NewUnstartedServer(sim.Handler())
		if anyAddr {
			// Every 127.0.0.0/8 address reaches a listener on all of them.
			l, err := net.Listen("tcp", "0.0.0.0:0")
			if err != nil {
				stop()
				return nil, nil, fmt.Errorf("listening for the simulator: %w", err)
			}
			srv.Listener.Close()
			srv.Listener = l
		}
		srv.Start()
		stops = append(stops, srv.Close)
		urls = append(urls, srv.URL)
	}
	return urls, stop, nil
}

// sockets counts the open sockets of process pid (its listeners and
// connections), -1 when /proc cannot tell.
func sockets(pid int) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

func byTargets(a, b *replica) int { return a.targets - b.targets }

func maxOf(rs []*replica, f func(*replica) float64) float64 {
	m := f(rs[0])
	for _, r := range rs[1:] {
		m = max(m, f(r))
	}
	return m
}
