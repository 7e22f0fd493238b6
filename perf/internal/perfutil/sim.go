package perfutil

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-kit/log"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// simEnv carries the JSON-encoded simulator.Config when this binary runs as
// the simulator child of a figure program.
const simEnv = "VLLM_PROBER_PERF_SIM_CONFIG"

// MaybeRunSimChild runs a vllm_sim server and exits when this process was
// started by StartSim; otherwise it returns at once. Call it first in main.
// The child listens on a free loopback port, writes "ADDR <host:port>" on
// standard output, and serves until SIGTERM or until standard input closes
// (the parent died); it then closes the simulator, which flushes the trace.
func MaybeRunSimChild() {
	raw := os.Getenv(simEnv)
	if raw == "" {
		return
	}
	if err := runSimChild(raw); err != nil {
		fmt.Fprintln(os.Stderr, "simulator child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runSimChild(raw string) error {
	var cfg simulator.Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("decoding the configuration: %w", err)
	}
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	handler, writeArrivals := recordArrivals(sim.Handler())
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	fmt.Printf("ADDR %s\n", l.Addr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(stop)
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-stop:
	case <-stdinClosed:
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	}
	closeErr := sim.Close() // ends in-flight streams, flushes the trace
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return errors.Join(closeErr, fmt.Errorf("shutting down: %w", err))
	}
	return errors.Join(closeErr, writeArrivals())
}

// Sim is a vllm_sim server. Started by StartSim it runs in a child process
// (this binary, re-executed), so that it competes with the client for the
// machine's cores as a separate server would, not for the client's Go
// scheduler; by RunSim with inProcess, in this process.
type Sim struct {
	URL string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	stop  func() error // in-process only
}

// RunSim starts a simulator with cfg in a child process (StartSim) or, when
// inProcess, in this process behind an httptest server.
func RunSim(cfg simulator.Config, inProcess bool) (*Sim, error) {
	if !inProcess {
		return StartSim(cfg)
	}
	sim, err := simulator.New(cfg, log.NewNopLogger())
	if err != nil {
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	srv := httptest.NewServer(sim.Handler())
	return &Sim{URL: srv.URL, stop: func() error {
		defer srv.Close()
		return sim.Close()
	}}, nil
}

// StartSim starts the simulator child with cfg (ListenAddress is ignored) and
// returns once it listens.
func StartSim(cfg simulator.Config) (*Sim, error) { return startSim(cfg) }

// startSim starts the simulator child with extra environment variables.
func startSim(cfg simulator.Config, env ...string) (*Sim, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the simulator configuration: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), simEnv+"="+string(raw)), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("simulator child stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("simulator child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the simulator child: %w", err)
	}
	s := &Sim{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
				addr <- a
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.URL = "http://" + a
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("the simulator child exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return nil, errors.New("the simulator child did not listen within 30s")
	}
}

// Pid is the child's process id; 0 for a simulator in this process.
func (s *Sim) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop closes the simulator, flushing its trace; a child is asked to and
// waited for.
func (s *Sim) Stop() error {
	if s.stop != nil {
		return s.stop()
	}
	_ = s.stdin.Close()
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("the simulator child: %w", err)
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		return errors.New("the simulator child did not stop within 20s")
	}
}
