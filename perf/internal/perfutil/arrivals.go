package perfutil

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/simulator"
)

// arrivalsEnv names the file in which the simulator child of
// StartSimRecordingArrivals records when each generation request arrived.
const arrivalsEnv = "VLLM_PROBER_PERF_SIM_ARRIVALS"

// Arrival is when the simulator's HTTP server handed a generation request to
// the simulator: the server's side of a client's TTFT.
type Arrival struct {
	RequestID string `json:"request_id"`
	Time      int64  `json:"time_unix_nano"`
}

// StartSimRecordingArrivals is StartSim whose child (with env added to its
// environment, e.g. GOGC=off), when it stops, also writes to path one JSON
// line (an Arrival) per completion or chat request.
// A request without an X-Request-Id gets one ("arrival-N"), which the
// simulator then uses in its trace, so arrivals and trace events match.
func StartSimRecordingArrivals(cfg simulator.Config, path string, env ...string) (*Sim, error) {
	return startSim(cfg, append([]string{arrivalsEnv + "=" + path}, env...)...)
}

// ReadArrivals reads a file written by a StartSimRecordingArrivals child.
func ReadArrivals(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the arrivals: %w", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a Arrival
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return nil, fmt.Errorf("parsing the arrivals: %w", err)
		}
		out[a.RequestID] = a.Time
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the arrivals: %w", err)
	}
	return out, nil
}

// recordArrivals wraps the simulator's handler when the child was asked to
// record arrivals; write saves them (call it once the server has stopped).
func recordArrivals(h http.Handler) (wrapped http.Handler, write func() error) {
	path := os.Getenv(arrivalsEnv)
	if path == "" {
		return h, func() error { return nil }
	}
	var (
		mu   sync.Mutex
		seen []Arrival
	)
	wrapped = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && (r.URL.Path == "/v1/completions" || r.URL.Path == "/v1/chat/completions") {
			now := time.Now().UnixNano()
			mu.Lock()
			id := r.Header.Get("X-Request-Id")
			if id == "" {
				id = "arrival-" + strconv.Itoa(len(seen))
				r.Header.Set("X-Request-Id", id)
			}
			seen = append(seen, Arrival{RequestID: id, Time: now})
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
	write = func() error {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("writing the arrivals: %w", err)
		}
		bw := bufio.NewWriter(f)
		enc := json.NewEncoder(bw)
		for _, a := range seen {
			if err := enc.Encode(a); err != nil {
				f.Close()
				return fmt.Errorf("writing the arrivals: %w", err)
			}
		}
		if err := bw.Flush(); err != nil {
			f.Close()
			return fmt.Errorf("writing the arrivals: %w", err)
		}
		return f.Close()
	}
	return wrapped, write
}

// TracedRun is one client run of a side-by-side benchmark: a directory of
// its own under the benchmark's, and a fresh simulator child (no batch
// slowdown, no jitter) writing its trace and its arrivals there.
type TracedRun struct {
	Dir      string
	Config   simulator.Config
	Arrivals string // the arrivals file (ReadArrivals)
	Sim      *Sim
}

// StartTracedRun creates a run directory under parent and starts the
// simulator with ttft and itl, room for streams concurrent requests and env
// added to the child's environment. Close removes the directory.
func StartTracedRun(parent string, ttft, itl time.Duration, streams int, env ...string) (*TracedRun, error) {
	dir, err := os.MkdirTemp(parent, "run-")
	if err != nil {
		return nil, fmt.Errorf("creating a run directory: %w", err)
	}
	r := &TracedRun{Dir: dir, Config: simulator.DefaultConfig(), Arrivals: filepath.Join(dir, "arrivals.jsonl")}
	r.Config.TTFT, r.Config.ITL, r.Config.BatchSlowdown, r.Config.Jitter = ttft, itl, 0, 0
	r.Config.MaxNumSeqs = max(r.Config.MaxNumSeqs, streams)
	r.Config.TraceFile = filepath.Join(dir, "trace.jsonl")
	if r.Sim, err = StartSimRecordingArrivals(r.Config, r.Arrivals, env...); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// RunClient runs the client cmd to its end and stops the simulator; a
// failing client's error carries the tail of its output.
func (r *TracedRun) RunClient(cmd *exec.Cmd) error {
	output, runErr := cmd.CombinedOutput()
	stopErr := r.Sim.Stop()
	if runErr != nil {
		return fmt.Errorf("%w\n%s", runErr, Tail(output, 20))
	}
	return stopErr
}

// Close removes the run directory.
func (r *TracedRun) Close() { _ = os.RemoveAll(r.Dir) }

// PythonClient is the command running vLLM's client script in dir with
// python, PYTHONPATH pypath when not "", and env added to the environment.
func PythonClient(ctx context.Context, python, dir, pypath string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if pypath != "" {
		cmd.Env = append(cmd.Env, "PYTHONPATH="+pypath)
	}
	return cmd
}
