package perfutil

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vllm-prober/vllm_prober/internal/daemon"
	"github.com/vllm-prober/vllm_prober/internal/daemonweb"
)

// childEnv names the configuration file when this binary runs as the daemon
// child of a figure program; childAddrEnv its listen address.
// childPprofEnv, when set, is a loopback address where the child serves
// net/http/pprof (on a listener of its own, not the daemon's).
const (
	childEnv      = "VLLM_PROBER_PERF_DAEMON_CONFIG"
	childAddrEnv  = "VLLM_PROBER_PERF_DAEMON_ADDR"
	childPprofEnv = "VLLM_PROBER_PERF_DAEMON_PPROF"
	// ShardEnv, "index/count" (e.g. "3/11"), makes the child one replica of a
	// sharded fleet (daemon.Options.ShardIndex and ShardCount).
	ShardEnv = "VLLM_PROBER_PERF_DAEMON_SHARD"
	// HistoryEnv, a number, is the child's --history.limit
	// (daemon.Options.HistoryLimit).
	HistoryEnv = "VLLM_PROBER_PERF_DAEMON_HISTORY"
)

// MaybeRunDaemonChild runs the daemon and exits when this process was started
// by StartDaemon; otherwise it returns at once. Call it first in main.
func MaybeRunDaemonChild() {
	path := os.Getenv(childEnv)
	if path == "" {
		return
	}
	logger := level.NewFilter(log.NewLogfmtLogger(log.NewSyncWriter(os.Stderr)), level.AllowWarn())
	addrs := []string{os.Getenv(childAddrEnv)}
	systemd := false
	webCfg := ""
	opts := daemon.Options{ConfigFile: path,
		WebFlags: &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &webCfg}}
	if v := os.Getenv(ShardEnv); v != "" {
		if _, err := fmt.Sscanf(v, "%d/%d", &opts.ShardIndex, &opts.ShardCount); err != nil {
			fmt.Fprintf(os.Stderr, "daemon child: %s=%q: %v\n", ShardEnv, v, err)
			os.Exit(1)
		}
	}
	if v := os.Getenv(HistoryEnv); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &opts.HistoryLimit); err != nil {
			fmt.Fprintf(os.Stderr, "daemon child: %s=%q: %v\n", HistoryEnv, v, err)
			os.Exit(1)
		}
	}
	daemon.SetGCDefault(os.Getenv) // as vllm_prober's main
	d, err := daemon.New(opts, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemon child:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if addr := os.Getenv(childPprofEnv); addr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				fmt.Fprintln(os.Stderr, "daemon child: pprof:", err)
			}
		}()
		defer srv.Close()
	}
	if err := d.Run(ctx, daemonweb.Handler(d)); err != nil {
		fmt.Fprintln(os.Stderr, "daemon child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Daemon is a vllm_prober daemon running in a child process (this binary,
// re-executed), so that its CPU time and memory are its own.
type Daemon struct {
	cmd      *exec.Cmd
	URL      string
	pprofURL string
	done     chan error
}

// Profile fetches /debug/pprof/<name>?<query> from a child started by
// StartDaemonWithPprof and writes it to path.
func (d *Daemon) Profile(name, query, path string) error {
	if d.pprofURL == "" {
		return fmt.Errorf("the daemon child serves no pprof")
	}
	resp, err := http.Get(d.pprofURL + "/debug/pprof/" + name + "?" + query)
	if err != nil {
		return fmt.Errorf("fetching the %s profile: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching the %s profile: %s", name, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("fetching the %s profile: %w", name, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing the %s profile: %w", name, err)
	}
	return nil
}

// StartDaemon writes config to a file in dir and starts the daemon child on a
// free loopback port; it returns once /-/ready answers 200.
func StartDaemon(dir, config string) (*Daemon, error) {
	return StartDaemonWith(dir, config, false)
}

// StartDaemonWithPprof is StartDaemon with net/http/pprof served by the child
// on a second loopback port (see Profile).
func StartDaemonWithPprof(dir, config string) (*Daemon, error) {
	return StartDaemonWith(dir, config, true)
}

// StartDaemonWith is StartDaemon with pprof served when withPprof, and env
// ("KEY=value", e.g. GOMEMLIMIT=128MiB) added to the child's environment only.
func StartDaemonWith(dir, config string, withPprof bool, env ...string) (*Daemon, error) {
	path := filepath.Join(dir, "vllm_prober.yml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("writing the configuration: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+path, childAddrEnv+"="+addr)
	cmd.Env = append(cmd.Env, env...)
	var pprofURL string
	if withPprof {
		pl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		paddr := pl.Addr().String()
		pl.Close()
		cmd.Env = append(cmd.Env, childPprofEnv+"="+paddr)
		pprofURL = "http://" + paddr
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the daemon child: %w", err)
	}
	d := &Daemon{cmd: cmd, URL: "http://" + addr, pprofURL: pprofURL, done: make(chan error, 1)}
	go func() { d.done <- cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(d.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("the daemon child was not ready within 30s")
		}
	}
}

// Pid is the child's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stop terminates the child and waits for it.
func (d *Daemon) Stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		return err
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		return fmt.Errorf("the daemon child did not stop within 20s of SIGTERM")
	}
}

var goroutinesRE = regexp.MustCompile(`(?m)^go_goroutines ([0-9.e+]+)$`)

// Scrape fetches the daemon's /metrics and returns how long it took, the size
// of the body and the go_goroutines value (-1 when absent).
func (d *Daemon) Scrape() (took time.Duration, size int, goroutines int, err error) {
	start := time.Now()
	resp, err := http.Get(d.URL + "/metrics")
	if err != nil {
		return 0, 0, -1, fmt.Errorf("scraping the daemon: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took = time.Since(start)
	if err != nil {
		return 0, 0, -1, fmt.Errorf("scraping the daemon: %w", err)
	}
	goroutines = -1
	if m := goroutinesRE.FindSubmatch(body); m != nil {
		if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			goroutines = int(v)
		}
	}
	return took, len(body), goroutines, nil
}

// Sum fetches the daemon's /metrics (text) and sums the samples of family
// name, e.g. vllm_probe_attempts_total: the work the daemon did, to tell a
// daemon starved of CPU on a loaded machine from one that costs less.
func (d *Daemon) Sum(name string) (float64, error) {
	_, text, err := ScrapeAs(d.URL+"/metrics", AcceptText)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for line := range bytes.Lines(text) {
		rest, ok := bytes.CutPrefix(line, []byte(name))
		if !ok || len(rest) == 0 || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := bytes.Fields(rest[bytes.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(string(f[0]), 64); err == nil {
			sum += v
		}
	}
	return sum, nil
}
