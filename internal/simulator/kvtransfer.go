package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Prefill/decode disaggregation as vLLM's NixlConnector serves it
// (vllm-project/vllm vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py,
// and the proxy protocol of tests/v1/kv_connector/nixl_integration/toy_proxy_server.py):
//
//   - a proxy sends the request to a prefill instance with
//     kv_transfer_params {"do_remote_decode": true}, max_tokens 1 and
//     stream false; the prefill instance computes the prompt's KV cache and
//     answers with kv_transfer_params naming where the blocks are
//     (do_remote_prefill true, remote_engine_id, remote_block_ids,
//     remote_host, remote_port, tp_size);
//   - the proxy sends the original request with those kv_transfer_params to
//     a decode instance, which pulls the blocks over NIXL (the request waits
//     for them, counted by vllm:num_requests_waiting_by_reason{reason="deferred"}),
//     skips the prefill and decodes.
//
// The simulator keeps the protocol and the metrics (NixlPromMetrics in the
// same file: vllm:nixl_xfer_time_seconds, vllm:nixl_bytes_transferred,
// vllm:nixl_num_failed_transfers_total, ...; the external_kv_transfer source
// of vllm:prompt_tokens_by_source_total) and replaces the pull by
// Config.KVTransferDelay, a knob, so that a test can make the transfer slow
// while both instances look healthy on their own.

// KV connector roles of vLLM's --kv-transfer-config (kv_role).
const (
	KVRoleBoth     = "kv_both"
	KVRoleProducer = "kv_producer"
	KVRoleConsumer = "kv_consumer"
	// KVConnectorNixl is the one connector the simulator serves.
	KVConnectorNixl = "NixlConnector"
)

// KVTransferConfig is vLLM's --kv-transfer-config, the two keys the
// simulator reads. The zero value configures no connector: requests'
// kv_transfer_params are then ignored, as vLLM ignores them.
type KVTransferConfig struct {
	Connector string `json:"kv_connector"`
	Role      string `json:"kv_role"`
}

// ParseKVTransferConfig reads --kv-transfer-config's JSON; "" is no connector.
func ParseKVTransferConfig(s string) (KVTransferConfig, error) {
	var c KVTransferConfig
	if s == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return c, fmt.Errorf("kv transfer config must be a JSON object like {\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}: %w", err)
	}
	return c, c.validate()
}

func (c KVTransferConfig) validate() error {
	if c == (KVTransferConfig{}) {
		return nil
	}
	if c.Connector != KVConnectorNixl {
		return fmt.Errorf("kv_connector must be %s, got %q", KVConnectorNixl, c.Connector)
	}
	switch c.Role {
	case KVRoleBoth, KVRoleProducer, KVRoleConsumer:
		return nil
	}
	return fmt.Errorf("kv_role must be one of %s, %s, %s, got %q", KVRoleBoth, KVRoleProducer, KVRoleConsumer, c.Role)
}

func (c KVTransferConfig) produces() bool { return c.Role == KVRoleBoth || c.Role == KVRoleProducer }
func (c KVTransferConfig) consumes() bool { return c.Role == KVRoleBoth || c.Role == KVRoleConsumer }

// kvTransferParams is a request's or a response's kv_transfer_params.
type kvTransferParams struct {
	DoRemoteDecode  bool    `json:"do_remote_decode"`
	DoRemotePrefill bool    `json:"do_remote_prefill"`
	RemoteEngineID  *string `json:"remote_engine_id"`
	RemoteBlockIDs  []int   `json:"remote_block_ids"`
	RemoteHost      *string `json:"remote_host"`
	RemotePort      *int    `json:"remote_port"`
	TPSize          int     `json:"tp_size,omitempty"`
}

// kvBytesPerToken is the KV cache size of one token of an 8B Llama (32
// layers × K and V × 8 KV heads × 128 dimensions × 2 bytes), for
// vllm:nixl_bytes_transferred.
const kvBytesPerToken = 32 * 2 * 8 * 128 * 2

// nixlSideChannelPort is vLLM's default VLLM_NIXL_SIDE_CHANNEL_PORT.
const nixlSideChannelPort = 5600

// kvTransferMetrics are NixlPromMetrics' families, kept per engine.
type kvTransferMetrics struct {
	xferTime        *histogram
	postTime        *histogram
	bytes           *histogram
	descriptors     *histogram
	failedTransfers counter
	failedNotifs    counter
	expiredReqs     counter
	externalTokens  counter // prompt tokens whose KV came from a remote prefill
}

// Bucket bounds of NixlPromMetrics.
var (
	bucketsNixlTime  = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0}
	bucketsNixlDescs = []float64{10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000}
)

func bucketsNixlBytes() []float64 {
	var b []float64
	for i := 1; i < 25; i += 2 {
		b = append(b, float64(uint64(1)<<(10+i)))
	}
	return b
}

func newKVTransferMetrics() *kvTransferMetrics {
	return &kvTransferMetrics{
		xferTime:    newHistogram(bucketsNixlTime[1:]),
		postTime:    newHistogram(bucketsNixlTime),
		bytes:       newHistogram(bucketsNixlBytes()),
		descriptors: newHistogram(bucketsNixlDescs),
	}
}

func (m *kvTransferMetrics) reset() {
	for _, h := range []*histogram{m.xferTime, m.postTime, m.bytes, m.descriptors} {
		h.reset()
	}
	for _, c := range []*counter{&m.failedTransfers, &m.failedNotifs, &m.expiredReqs, &m.externalTokens} {
		c.v.Store(0)
	}
}

// remotePrefill reports whether g's prefill was done by another instance
// whose KV cache this one pulls.
func (s *Simulator) remotePrefill(g *genRequest) bool {
	return g.kvTransfer != nil && g.kvTransfer.DoRemotePrefill && s.cfg.KVTransfer.consumes()
}

// remoteDecode reports whether g is a prefill for another instance's decode.
func (s *Simulator) remoteDecode(g *genRequest) bool {
	return g.kvTransfer != nil && g.kvTransfer.DoRemoteDecode && s.cfg.KVTransfer.produces()
}

// pullKV waits for a remote prefill's KV blocks to arrive (the knob
// KVTransferDelay), as a request in vLLM's WAITING_FOR_REMOTE_KVS state
// does, then records the transfer on engine e. It fails only when the
// client leaves or the simulator closes.
func (s *Simulator) pullKV(ctx context.Context, e *engine, g *genRequest, delay time.Duration) error {
	s.kvWaiting.Add(1)
	defer s.kvWaiting.Add(-1)
	start := time.Now()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errClosed
		}
	}
	m := e.m.kv
	m.xferTime.observe(time.Since(start).Seconds())
	m.postTime.observe(0.0005)
	m.bytes.observe(float64(g.promptTokens * kvBytesPerToken))
	m.descriptors.observe(float64(e.blocksFor(g.promptTokens)))
	m.externalTokens.add(g.promptTokens)
	return nil
}

// producedKV is the kv_transfer_params a prefill instance answers with:
// where the decode instance finds the prompt's blocks.
func (s *Simulator) producedKV(e *engine, g *genRequest) *kvTransferParams {
	id := fmt.Sprintf("vllm-sim-%d-%d", s.start.UnixNano(), e.idx)
	host, port := "127.0.0.1", nixlSideChannelPort
	blocks := make([]int, e.blocksFor(g.promptTokens))
	for i := range blocks {
		blocks[i] = i
	}
	return &kvTransferParams{DoRemotePrefill: true, RemoteEngineID: &id, RemoteBlockIDs: blocks, RemoteHost: &host, RemotePort: &port, TPSize: 1}
}

// renderNixl writes NixlPromMetrics' families, with their help texts.
func (s *Simulator) renderNixl(x *expo, gs []*group) {
	h := func(name, help string, f func(*kvTransferMetrics) *histogram) {
		x.histogram(name, help, gs, func(m *engineMetrics) *histogram { return f(m.kv) })
	}
	h("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.", func(m *kvTransferMetrics) *histogram { return m.xferTime })
	h("vllm:nixl_post_time_seconds", "Histogram of transfer post time for NIXL KV Cache transfers.", func(m *kvTransferMetrics) *histogram { return m.postTime })
	h("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.", func(m *kvTransferMetrics) *histogram { return m.bytes })
	h("vllm:nixl_num_descriptors", "Histogram of number of descriptors per NIXL  KV Cache transfers.", func(m *kvTransferMetrics) *histogram { return m.descriptors })
	x.counter("vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.", gs, func(m *engineMetrics) *counter { return &m.kv.failedTransfers })
	x.counter("vllm:nixl_num_failed_notifications", "Number of failed NIXL KV Cache notifications.", gs, func(m *engineMetrics) *counter { return &m.kv.failedNotifs })
	x.counter("vllm:nixl_num_kv_expired_reqs", "Number of requests that had their KV expire. NOTE: This metric is tracked on the P instance.", gs, func(m *engineMetrics) *counter { return &m.kv.expiredReqs })
}
