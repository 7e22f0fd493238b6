// Package simulator implements vllm_sim, a GPU-free stand-in for a vLLM
// OpenAI-compatible server: the same HTTP and SSE surface, the same
// /metrics exposition, and a continuous-batching load model (batch slots,
// FIFO queue, paged KV cache with preemption) so that latency, queueing and
// KV pressure respond to load the way a real server's do.
package simulator

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// Simulator is one simulated vLLM server with DataParallelSize engines.
type Simulator struct {
	cfg     Config
	logger  log.Logger
	engines []*engine
	start   time.Time
	tracer  *tracer
	handler http.Handler

	knobs atomic.Pointer[knobs]
	// sleeping is vLLM's sleep level (0 awake), set by POST /sleep.
	sleeping atomic.Int32
	adminMu  sync.Mutex // serialises /admin/config updates

	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
	mu        sync.Mutex // guards closed and wg.Add
	closed    bool
	wg        sync.WaitGroup // in-flight HTTP handlers

	inflight atomic.Int64 // /load
	admitted atomic.Int64 // generation requests past admission (MaxNumQueuedReqs)
	// kvWaiting counts the requests waiting for a remote prefill's KV
	// blocks (kvtransfer.go).
	kvWaiting atomic.Int64
	reqSeq    atomic.Uint64 // request ids and per-request seeds

	rngMu sync.Mutex
	rng   *rand.Rand

	answers *answers // --answers; nil when none
}

// New validates cfg and returns a ready simulator. It starts no goroutine;
// work happens in the HTTP handlers, which Close stops.
func New(cfg Config, logger log.Logger) (*Simulator, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid simulator config: %w", err)
	}
	if cfg.Version == "" {
		cfg.Version = defaultVersion(cfg.MetricsNames)
	}
	now := time.Now()
	s := &Simulator{
		cfg:    cfg,
		logger: logger,
		start:  now,
		done:   make(chan struct{}),
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
	}
	if cfg.AnswersFile != "" {
		a, err := loadAnswers(cfg.AnswersFile)
		if err != nil {
			return nil, err
		}
		s.answers = a
	}
	k := cfg.knobs()
	s.knobs.Store(&k)
	for i := 0; i < cfg.DataParallelSize; i++ {
		s.engines = append(s.engines, newEngine(i, cfg.MaxNumSeqs, cfg.KVCacheTokens, cfg.BlockSize, cfg.MaxModelLen, now))
	}
	if cfg.TraceFile != "" {
		t, err := newTracer(cfg.TraceFile)
		if err != nil {
			return nil, err
		}
		s.tracer = t
	}
	s.handler = s.routes()
	level.Info(logger).Log("msg", "vLLM simulator ready", "engine", cfg.Engine, "model", cfg.Model, "engines", cfg.DataParallelSize,
		"max_num_seqs", cfg.MaxNumSeqs, "kv_cache_tokens", cfg.KVCacheTokens, "ttft", cfg.TTFT, "itl", cfg.ITL,
		"metrics_names", cfg.MetricsNames, "api_key_set", cfg.APIKey != "", "trace_file", cfg.TraceFile)
	return s, nil
}

func defaultVersion(names string) string {
	switch names {
	case MetricsLegacy:
		return "0.8.5"
	case MetricsV010:
		return "0.10.1"
	}
	return "0.32.0"
}

// Handler returns the whole HTTP surface: OpenAI routes, /health, /ping,
// /version, /load, /metrics and /admin/config.
func (s *Simulator) Handler() http.Handler { return s.handler }

// Close ends every in-flight request (stalled and hung ones included),
// waits for their handlers to return, then flushes and closes the trace
// file. Further requests get 503. Close is idempotent.
func (s *Simulator) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.done)
		s.mu.Unlock()
		s.wg.Wait()
		if s.tracer != nil {
			s.closeErr = s.tracer.close()
		}
		level.Info(s.logger).Log("msg", "vLLM simulator closed")
	})
	return s.closeErr
}

// track registers an in-flight handler so that Close can wait for it.
func (s *Simulator) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		defer s.wg.Done()
		next.ServeHTTP(w, r)
	})
}

func (s *Simulator) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", generation(s, s.completionGen))
	mux.HandleFunc("POST /v1/chat/completions", generation(s, s.chatGen))
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("POST /v1/responses", generation(s, s.responsesGen))
	mux.HandleFunc("GET /health", s.handleDialectHealth)
	for _, p := range s.dialect().extraHealth {
		mux.HandleFunc("GET "+p, s.handleDialectHealth)
	}
	if s.dialect().sleep {
		mux.HandleFunc("POST /sleep", s.handleSleep)
		mux.HandleFunc("POST /wake_up", s.handleWakeUp)
		mux.HandleFunc("GET /is_sleeping", s.handleIsSleeping)
	}
	mux.HandleFunc("GET /ping", s.handleHealth)
	mux.HandleFunc("POST /ping", s.handleHealth)
	mux.HandleFunc("GET /version", s.handleVersion)
	mux.HandleFunc("GET /load", s.handleLoad)
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	for _, p := range s.dialect().extraMetrics {
		mux.HandleFunc("GET "+p, s.handleMetrics)
	}
	mux.HandleFunc("GET /admin/config", s.handleAdminGet)
	mux.HandleFunc("POST /admin/config", s.handleAdminPost)
	methodNotAllowed := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
	}
	for _, p := range []string{"/v1/completions", "/v1/chat/completions", "/v1/models", "/v1/embeddings", "/v1/responses", "/health", "/ping", "/version", "/load", "/metrics", "/admin/config"} {
		mux.HandleFunc(p, methodNotAllowed)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// FastAPI's body for unknown routes.
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	})
	return s.track(s.authenticate(mux))
}

// authenticate mirrors vLLM's --api-key middleware: only /v1 routes need
// "Authorization: Bearer <key>"; the answer otherwise is vLLM's
// {"error": "Unauthorized"} with 401.
func (s *Simulator) authenticate(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions && (r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/")) {
			got := []byte(r.Header.Get("Authorization"))
			if subtle.ConstantTimeCompare(got, want) != 1 {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := marshalNoEscape(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Simulator) currentKnobs() knobs { return *s.knobs.Load() }

// drawFault reports whether the active fault applies to this request.
func (s *Simulator) drawFault(k knobs) bool {
	if k.Fault == FaultNone || k.FaultRate <= 0 {
		return false
	}
	if k.FaultRate >= 1 {
		return true
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64() < k.FaultRate
}

func (s *Simulator) engineDead() bool {
	return s.currentKnobs().Fault == FaultEngineDead
}

func (s *Simulator) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.engineDead() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Simulator) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version})
}

func (s *Simulator) handleLoad(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int64{"server_load": s.inflight.Load()})
}

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen *int              `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

func (s *Simulator) handleModels(w http.ResponseWriter, r *http.Request) {
	created := time.Now().Unix()
	perm := func(id string) []modelPermission {
		return []modelPermission{{
			ID: "modelperm-" + strconv.FormatUint(hashString(id), 16), Object: "model_permission",
			Created: created, AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
		}}
	}
	maxLen := s.cfg.MaxModelLen
	cards := []modelCard{{
		ID: s.cfg.Model, Object: "model", Created: created, OwnedBy: s.dialect().ownedBy, Root: s.cfg.Model,
		MaxModelLen: &maxLen, Permission: perm(s.cfg.Model),
	}}
	// vLLM's LoRA cards: root is the adapter's path, parent the base model,
	// max_model_len unset (serving_models.py, show_available_models).
	for _, m := range s.cfg.LoRAModules {
		root := m.Path
		if root == "" {
			root = s.cfg.Model
		}
		parent := s.cfg.Model
		cards = append(cards, modelCard{
			ID: m.Name, Object: "model", Created: created, OwnedBy: "vllm", Root: root,
			Parent: &parent, Permission: perm(m.Name),
		})
	}
	writeJSON(w, http.StatusOK, struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{"list", cards})
}

func (s *Simulator) adminView() adminView {
	k := s.currentKnobs()
	return adminView{
		Model: s.cfg.Model, MaxModelLen: s.cfg.MaxModelLen, KVCacheTokens: s.cfg.KVCacheTokens,
		BlockSize: s.cfg.BlockSize, DataParallelSize: s.cfg.DataParallelSize, Engine: s.cfg.Engine, MetricsNames: s.cfg.MetricsNames,
		ErrorShape: s.cfg.ErrorShape, Version: s.cfg.Version, TraceFile: s.cfg.TraceFile, APIKeySet: s.cfg.APIKey != "",
		TTFT: k.TTFT.String(), ITL: k.ITL.String(), PrefillPerToken: k.PrefillPerToken.String(),
		BatchSlowdown: k.BatchSlowdown, Jitter: k.Jitter, MaxNumSeqs: k.MaxNumSeqs,
		Fault: k.Fault, FaultRate: k.FaultRate, FaultStatus: k.FaultStatus, FaultAfter: k.FaultAfter,
		FaultDelay: k.FaultDelay.String(), KVTransferDelay: k.KVTransferDelay.String(),
	}
}

func (s *Simulator) handleAdminGet(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.adminView())
}

func (s *Simulator) handleAdminPost(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("reading body: %v", err)})
		return
	}
	s.adminMu.Lock()
	old := s.currentKnobs()
	k, err := applyAdmin(old, body)
	if err != nil {
		s.adminMu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	s.knobs.Store(&k)
	now := time.Now()
	if k.MaxNumSeqs != old.MaxNumSeqs {
		for _, e := range s.engines {
			e.setMaxNumSeqs(k.MaxNumSeqs, now)
		}
	}
	if k.Fault == FaultMetricsReset && (old.Fault != FaultMetricsReset || hasKey(body, "fault")) {
		for _, e := range s.engines {
			e.m.reset(now)
		}
	}
	s.adminMu.Unlock()
	level.Info(s.logger).Log("msg", "runtime config changed", "ttft", k.TTFT, "itl", k.ITL,
		"batch_slowdown", k.BatchSlowdown, "max_num_seqs", k.MaxNumSeqs, "fault", k.Fault, "fault_rate", k.FaultRate)
	writeJSON(w, http.StatusOK, s.adminView())
}

func hasKey(body []byte, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}
