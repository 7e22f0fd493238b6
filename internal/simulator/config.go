package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Metric surfaces selectable with Config.MetricsNames.
const (
	MetricsV1         = "v1"     // current vLLM V1 names (default)
	MetricsV010       = "v0.10"  // transitional: deprecated and new names side by side
	MetricsLegacy     = "legacy" // pre-0.9 (V0) names, no engine label
	ErrorShapeNested  = "nested" // {"error": {"message", "type", "param", "code"}} (vLLM >= 0.10.1)
	ErrorShapeFlat    = "flat"   // {"object": "error", "message", ...} (vLLM < 0.10.1)
	defaultHugeLine   = 1 << 20
	defaultFaultDelay = 5 * time.Second
)

// Fault names accepted by Config.Fault and POST /admin/config.
const (
	FaultNone              = ""
	FaultHTTPStatus        = "http_status"
	FaultHangBeforeHeaders = "hang_before_headers"
	FaultStall             = "stall"
	FaultCutStream         = "cut_stream"
	FaultMalformedChunk    = "malformed_chunk"
	FaultErrorEvent        = "error_event"
	FaultHugeLine          = "huge_line"
	FaultEngineDead        = "engine_dead"
	FaultSlowMetrics       = "slow_metrics"
	FaultMetricsReset      = "metrics_reset"
)

var validFaults = []string{
	FaultHTTPStatus, FaultHangBeforeHeaders, FaultStall, FaultCutStream, FaultMalformedChunk,
	FaultErrorEvent, FaultHugeLine, FaultEngineDead, FaultSlowMetrics, FaultMetricsReset,
	FaultWrongAnswer, FaultBrokenJSON, FaultNoToolCall, FaultZeroEmbedding, FaultAdapterGone,
}

// Config holds every setting of the simulator. Each field has a matching
// command-line flag in cmd/vllm_sim.
type Config struct {
	ListenAddress string // --web.listen-address; used by cmd/vllm_sim only

	Model       string       // served model name
	LoRAModules []LoRAModule // adapters served on top of Model (--lora-modules)
	MaxModelLen int          // max prompt + generated tokens per request
	MaxNumSeqs  int          // running requests per engine
	// MaxNumQueuedReqs caps the requests in flight (waiting or running,
	// across engines) as vLLM's --max-num-queued-reqs does: one more is
	// refused with vLLM's 503 "Request queue full.". 0: no cap.
	MaxNumQueuedReqs int
	KVCacheTokens    int // KV cache capacity per engine, in tokens
	BlockSize        int // KV block size in tokens
	DataParallelSize int // number of engines

	TTFT            time.Duration // base time to first token once scheduled
	ITL             time.Duration // base inter-token latency with a batch of one
	BatchSlowdown   float64       // ITL = ITL * (1 + BatchSlowdown*(running-1))
	PrefillPerToken time.Duration // added to TTFT per prompt token
	Jitter          float64       // each delay is scaled by a uniform factor in [1-Jitter, 1+Jitter]

	// Engine is the engine whose surface is served (EngineNames): /metrics
	// names, streaming quirks, error bodies, health and models answers.
	Engine       string
	MetricsNames string // "v1", "v0.10" or "legacy"
	ErrorShape   string // "nested" or "flat"
	Version      string // reported by /version; empty picks one matching MetricsNames
	TraceFile    string // JSON lines, one per streamed event; empty disables
	APIKey       string // when set, /v1/* needs "Authorization: Bearer <key>"

	Fault         string        // active fault, see Fault* constants
	FaultRate     float64       // probability a request (or scrape) gets the fault, 0..1
	FaultStatus   int           // HTTP status for the http_status fault
	FaultAfter    int           // tokens streamed before stream faults strike
	FaultDelay    time.Duration // delay added by slow_metrics
	HugeLineBytes int           // size of the huge_line event

	Seed uint64 // seed for jitter and fault_rate draws

	// AnswersFile is a JSON object of prompt substrings to scripted answers
	// (answers.go); Echo answers the prompt itself when no answer matches.
	AnswersFile string
	Echo        bool
	// EmbeddingDimension is the vector length /v1/embeddings returns.
	EmbeddingDimension int

	// SpecDecodeTokens is the number of speculative tokens drafted per step
	// (0: no speculative decoding); SpecAcceptRate the share accepted.
	SpecDecodeTokens int
	SpecAcceptRate   float64

	// ReasoningTokens, as a reasoning model behind one of vLLM's reasoning
	// parsers (DeepSeek-R1, Qwen3), makes the first N tokens of a streamed
	// chat completion reasoning: their deltas carry reasoning_content instead
	// of content, and the usage counts them in
	// completion_tokens_details.reasoning_tokens. 0: no reasoning.
	ReasoningTokens int

	// KVTransfer is vLLM's --kv-transfer-config: with a NixlConnector, the
	// simulator serves prefill/decode disaggregation's kv_transfer_params
	// (kvtransfer.go) and exports NIXL's metrics. KVTransferDelay is how long a
	// decode instance takes to pull a remote prefill's KV blocks.
	KVTransfer      KVTransferConfig
	KVTransferDelay time.Duration
}

// DefaultConfig returns the defaults documented in docs/simulator.md.
func DefaultConfig() Config {
	return Config{
		ListenAddress:    "127.0.0.1:8000",
		Model:            "meta-llama/Llama-3.1-8B-Instruct",
		MaxModelLen:      4096,
		MaxNumSeqs:       256,
		KVCacheTokens:    262144,
		BlockSize:        16,
		DataParallelSize: 1,
		TTFT:             50 * time.Millisecond,
		ITL:              10 * time.Millisecond,
		BatchSlowdown:    0.02,
		PrefillPerToken:  0,
		Jitter:           0,
		Engine:           EngineVLLM,
		MetricsNames:     MetricsV1,
		ErrorShape:       ErrorShapeNested,
		FaultRate:        1,
		FaultStatus:      500,
		FaultAfter:       1,
		FaultDelay:       defaultFaultDelay,
		HugeLineBytes:    defaultHugeLine,
		Seed:             1,
		KVTransferDelay:  5 * time.Millisecond,

		EmbeddingDimension: 1024,
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("model must not be empty"))
	}
	if err := validateLoRAModules(c.Model, c.LoRAModules); err != nil {
		errs = append(errs, err)
	}
	if c.BlockSize <= 0 {
		errs = append(errs, fmt.Errorf("block size must be positive, got %d", c.BlockSize))
	}
	if c.MaxModelLen <= 0 {
		errs = append(errs, fmt.Errorf("max model len must be positive, got %d", c.MaxModelLen))
	}
	if c.KVCacheTokens < c.MaxModelLen {
		// vLLM refuses to start when one request at max_model_len cannot fit.
		errs = append(errs, fmt.Errorf("kv cache tokens (%d) must be at least max model len (%d)", c.KVCacheTokens, c.MaxModelLen))
	}
	if c.BlockSize > 0 && c.KVCacheTokens/c.BlockSize*c.BlockSize < c.MaxModelLen {
		errs = append(errs, fmt.Errorf("kv cache of %d whole blocks of %d tokens cannot hold max model len %d", c.KVCacheTokens/c.BlockSize, c.BlockSize, c.MaxModelLen))
	}
	if c.DataParallelSize < 1 {
		errs = append(errs, fmt.Errorf("data parallel size must be at least 1, got %d", c.DataParallelSize))
	}
	if c.MaxNumQueuedReqs < 0 {
		errs = append(errs, fmt.Errorf("max num queued reqs must not be negative, got %d", c.MaxNumQueuedReqs))
	}
	switch c.MetricsNames {
	case MetricsV1, MetricsV010, MetricsLegacy:
	default:
		errs = append(errs, fmt.Errorf("metrics names must be one of v1, v0.10, legacy, got %q", c.MetricsNames))
	}
	switch c.ErrorShape {
	case ErrorShapeNested, ErrorShapeFlat:
	default:
		errs = append(errs, fmt.Errorf("error shape must be nested or flat, got %q", c.ErrorShape))
	}
	if _, ok := dialects[c.Engine]; !ok {
		errs = append(errs, fmt.Errorf("engine must be one of %s, got %q", strings.Join(EngineNames(), ", "), c.Engine))
	}
	if c.SpecDecodeTokens < 0 || c.SpecAcceptRate < 0 || c.SpecAcceptRate > 1 {
		errs = append(errs, fmt.Errorf("spec decode tokens must not be negative and the accept rate must be in [0, 1], got %d and %g", c.SpecDecodeTokens, c.SpecAcceptRate))
	}
	if c.ReasoningTokens < 0 {
		errs = append(errs, fmt.Errorf("reasoning tokens must not be negative, got %d", c.ReasoningTokens))
	}
	if err := c.KVTransfer.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.EmbeddingDimension < 1 {
		errs = append(errs, fmt.Errorf("embedding dimension must be at least 1, got %d", c.EmbeddingDimension))
	}
	if c.HugeLineBytes <= 0 {
		errs = append(errs, fmt.Errorf("huge line bytes must be positive, got %d", c.HugeLineBytes))
	}
	k := c.knobs()
	if err := k.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// knobs are the settings that can change at run time through /admin/config.
type knobs struct {
	TTFT            time.Duration
	ITL             time.Duration
	PrefillPerToken time.Duration
	BatchSlowdown   float64
	Jitter          float64
	MaxNumSeqs      int
	Fault           string
	FaultRate       float64
	FaultStatus     int
	FaultAfter      int
	FaultDelay      time.Duration
	KVTransferDelay time.Duration
}

func (c *Config) knobs() knobs {
	return knobs{
		TTFT: c.TTFT, ITL: c.ITL, PrefillPerToken: c.PrefillPerToken,
		BatchSlowdown: c.BatchSlowdown, Jitter: c.Jitter, MaxNumSeqs: c.MaxNumSeqs,
		Fault: c.Fault, FaultRate: c.FaultRate, FaultStatus: c.FaultStatus,
		FaultAfter: c.FaultAfter, FaultDelay: c.FaultDelay, KVTransferDelay: c.KVTransferDelay,
	}
}

func (k *knobs) validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttft", k.TTFT}, {"itl", k.ITL}, {"prefill_per_token", k.PrefillPerToken}, {"fault_delay", k.FaultDelay}, {"kv_transfer_delay", k.KVTransferDelay}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.name, d.v))
		}
	}
	if k.BatchSlowdown < 0 {
		errs = append(errs, fmt.Errorf("batch_slowdown must not be negative, got %g", k.BatchSlowdown))
	}
	if k.Jitter < 0 || k.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("jitter must be in [0, 1), got %g", k.Jitter))
	}
	if k.MaxNumSeqs < 1 {
		errs = append(errs, fmt.Errorf("max_num_seqs must be at least 1, got %d", k.MaxNumSeqs))
	}
	if k.Fault != FaultNone && !isValidFault(k.Fault) {
		errs = append(errs, fmt.Errorf("unknown fault %q; valid faults: %s", k.Fault, strings.Join(validFaults, ", ")))
	}
	if k.FaultRate < 0 || k.FaultRate > 1 {
		errs = append(errs, fmt.Errorf("fault_rate must be in [0, 1], got %g", k.FaultRate))
	}
	if k.FaultStatus < 100 || k.FaultStatus > 599 {
		errs = append(errs, fmt.Errorf("fault_status must be an HTTP status code, got %d", k.FaultStatus))
	}
	if k.FaultAfter < 0 {
		errs = append(errs, fmt.Errorf("fault_after must not be negative, got %d", k.FaultAfter))
	}
	return errors.Join(errs...)
}

func isValidFault(f string) bool {
	for _, v := range validFaults {
		if v == f {
			return true
		}
	}
	return false
}

// adminView is the JSON document served by GET /admin/config. Durations are
// Go duration strings. The API key is never shown, only whether one is set.
type adminView struct {
	Model            string  `json:"model"`
	MaxModelLen      int     `json:"max_model_len"`
	KVCacheTokens    int     `json:"kv_cache_tokens"`
	BlockSize        int     `json:"block_size"`
	DataParallelSize int     `json:"data_parallel_size"`
	Engine           string  `json:"engine"`
	MetricsNames     string  `json:"metrics_names"`
	ErrorShape       string  `json:"error_shape"`
	Version          string  `json:"version"`
	TraceFile        string  `json:"trace_file"`
	APIKeySet        bool    `json:"api_key_set"`
	TTFT             string  `json:"ttft"`
	ITL              string  `json:"itl"`
	PrefillPerToken  string  `json:"prefill_per_token"`
	BatchSlowdown    float64 `json:"batch_slowdown"`
	Jitter           float64 `json:"jitter"`
	MaxNumSeqs       int     `json:"max_num_seqs"`
	Fault            string  `json:"fault"`
	FaultRate        float64 `json:"fault_rate"`
	FaultStatus      int     `json:"fault_status"`
	FaultAfter       int     `json:"fault_after"`
	FaultDelay       string  `json:"fault_delay"`
	KVTransferDelay  string  `json:"kv_transfer_delay"`
}

// readOnlyKeys appear in GET /admin/config but cannot be posted.
var readOnlyKeys = map[string]bool{
	"model": true, "max_model_len": true, "kv_cache_tokens": true, "block_size": true,
	"data_parallel_size": true, "engine": true, "metrics_names": true, "error_shape": true, "version": true,
	"trace_file": true, "api_key_set": true,
}

var writableKeys = []string{
	"ttft", "itl", "prefill_per_token", "batch_slowdown", "jitter", "max_num_seqs",
	"fault", "fault_rate", "fault_status", "fault_after", "fault_delay", "kv_transfer_delay",
}

// applyAdmin returns k updated with the JSON object body. Either every key
// applies or an error describes the first problem and k is unchanged.
func applyAdmin(k knobs, body []byte) (knobs, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return k, fmt.Errorf("body must be a JSON object: %w", err)
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		raw := m[key]
		var err error
		switch key {
		case "ttft":
			k.TTFT, err = parseDuration(raw)
		case "itl":
			k.ITL, err = parseDuration(raw)
		case "prefill_per_token":
			k.PrefillPerToken, err = parseDuration(raw)
		case "fault_delay":
			k.FaultDelay, err = parseDuration(raw)
		case "kv_transfer_delay":
			k.KVTransferDelay, err = parseDuration(raw)
		case "batch_slowdown":
			err = json.Unmarshal(raw, &k.BatchSlowdown)
		case "jitter":
			err = json.Unmarshal(raw, &k.Jitter)
		case "fault_rate":
			err = json.Unmarshal(raw, &k.FaultRate)
		case "max_num_seqs":
			err = json.Unmarshal(raw, &k.MaxNumSeqs)
		case "fault_status":
			err = json.Unmarshal(raw, &k.FaultStatus)
		case "fault_after":
			err = json.Unmarshal(raw, &k.FaultAfter)
		case "fault":
			err = json.Unmarshal(raw, &k.Fault)
		default:
			if readOnlyKeys[key] {
				return k, fmt.Errorf("key %q is read-only; set it with a command-line flag", key)
			}
			return k, fmt.Errorf("unknown key %q; valid keys: %s", key, strings.Join(writableKeys, ", "))
		}
		if err != nil {
			return k, fmt.Errorf("key %q: %w", key, err)
		}
	}
	if err := k.validate(); err != nil {
		return k, err
	}
	return k, nil
}

func parseDuration(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("want a Go duration string such as \"20ms\": %w", err)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a Go duration string such as \"20ms\": %w", err)
	}
	return d, nil
}
