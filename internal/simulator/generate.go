package simulator

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// pickEngine applies vLLM's data-parallel balancing: the engine with the
// lowest waiting*4+running, the lowest index on ties.
func (s *Simulator) pickEngine() *engine {
	best, bestLoad := s.engines[0], -1
	for _, e := range s.engines {
		if l := e.load(); bestLoad < 0 || l < bestLoad {
			best, bestLoad = e, l
		}
	}
	return best
}

// requestFaults are the faults drawn per completion request.
func isRequestFault(f string) bool {
	switch f {
	case FaultHTTPStatus, FaultHangBeforeHeaders, FaultStall, FaultCutStream, FaultMalformedChunk,
		FaultErrorEvent, FaultHugeLine, FaultWrongAnswer, FaultBrokenJSON, FaultNoToolCall:
		return true
	}
	return false
}

// run is the state of one request as it is generated.
type run struct {
	s      *Simulator
	e      *engine
	g      *genRequest
	sq     *seq
	k      knobs
	fault  string // request fault in effect, "" for none
	rng    *rand.Rand
	timer  *time.Timer
	out    sink
	firstT time.Time // first token flushed
	lastT  time.Time // last token flushed
	admitT time.Time // scheduling that produced the first token
	tokens int
	remote bool // the prefill was another instance's (kvtransfer.go)
}

// sink receives the events of a request: an SSE stream or a collector for
// the non-streaming JSON answer.
type sink interface {
	start() error                                    // stream: headers
	first() error                                    // chat stream: role event
	token(k int, finish string, text []byte) error   // one generated token
	toolCall(k int, finish string, sc *script) error // one token of a tool call's arguments
	malformed(k int) error                           // malformed_chunk fault
	errorEvent(msg string) error                     // error_event fault
	end(promptTokens, completionTokens int) error    // usage, [DONE] / JSON body
}

func (s *Simulator) serveGeneration(w http.ResponseWriter, r *http.Request, g *genRequest) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	ctx := r.Context()
	k := s.currentKnobs()
	if k.Fault == FaultEngineDead {
		s.writeError(w, http.StatusInternalServerError, "EngineCore encountered an issue. See stack trace (above) for the root cause.", nil)
		return
	}
	if level := s.sleepLevel(); level > 0 {
		s.writeError(w, http.StatusServiceUnavailable, "The engine is sleeping (level "+strconv.Itoa(level)+"); POST /wake_up wakes it.", nil)
		return
	}
	if limit := int64(s.cfg.MaxNumQueuedReqs); limit > 0 {
		// vLLM's admission check (AsyncLLM, --max-num-queued-reqs): a
		// request beyond the cap on unfinished requests is refused with
		// QueueOverflowError (vllm/v1/engine/exceptions.py).
		n := s.admitted.Add(1)
		defer s.admitted.Add(-1)
		if n > limit {
			s.writeError(w, http.StatusServiceUnavailable, "Request queue full.", nil)
			return
		}
	}
	w.Header().Set("X-Request-Id", g.requestID)
	fault := ""
	if isRequestFault(k.Fault) && s.drawFault(k) {
		fault = k.Fault
	}
	switch fault {
	case FaultHTTPStatus:
		s.writeError(w, k.FaultStatus, "Simulated fault: HTTP "+strconv.Itoa(k.FaultStatus), nil)
		return
	case FaultHangBeforeHeaders:
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		// Drop the connection without ever answering.
		panic(http.ErrAbortHandler)
	}

	if g.script = s.buildScript(g, fault); g.script != nil {
		// A scripted output ends where it ends (even with ignore_eos), or at max_tokens.
		if n := len(g.script.pieces); n > g.maxTokens {
			g.target, g.finish = g.maxTokens, "length"
		} else {
			g.target, g.finish = n, g.script.finish
		}
	}
	ru := &run{s: s, g: g, k: k, fault: fault}
	if k.Jitter > 0 {
		ru.rng = rand.New(rand.NewPCG(s.cfg.Seed, g.seq))
	}
	switch {
	case g.responses:
		ru.out = s.newResponsesSink(w, g)
	case g.stream:
		ru.out = s.newStreamSink(w, g)
	default:
		ru.out = &jsonSink{s: s, w: w, g: g}
	}
	if reason := ru.generate(ctx); reason == "abort" && !g.stream {
		// A non-streaming request cut short has no answer to give: drop
		// the connection rather than send an empty 200.
		panic(http.ErrAbortHandler)
	}
}

func (ru *run) jitter(d time.Duration) time.Duration {
	if ru.rng == nil || d <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + ru.k.Jitter*(2*ru.rng.Float64()-1)))
}

// sleepUntil waits for deadline t. It reports preempted when pc closes
// first, and an error when the client leaves or the simulator closes.
func (ru *run) sleepUntil(ctx context.Context, t time.Time, pc <-chan struct{}) (preempted bool, err error) {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-pc:
			return true, nil
		default:
			return false, nil
		}
	}
	if ru.timer == nil {
		ru.timer = time.NewTimer(d)
	} else {
		ru.timer.Reset(d)
	}
	select {
	case <-ru.timer.C:
		return false, nil
	case <-pc:
		ru.timer.Stop()
		return true, nil
	case <-ctx.Done():
		ru.timer.Stop()
		return false, ctx.Err()
	case <-ru.s.done:
		ru.timer.Stop()
		return false, errClosed
	}
}

// generate runs the request through the engine: queue, prefill, then one
// token per deadline. Deadlines are computed from the previous deadline,
// not from when the previous token was actually written, so scheduling
// noise never accumulates.
func (ru *run) generate(ctx context.Context) string {
	s, g := ru.s, ru.g
	ru.e = s.pickEngine()
	if ru.remote = s.remotePrefill(g); ru.remote {
		// A failed pull leaves ctx done or the simulator closed: the loop
		// then aborts at admission.
		_ = s.pullKV(ctx, ru.e, g, ru.k.KVTransferDelay)
	}
	if s.remoteDecode(g) {
		g.kvProduced = s.producedKV(ru.e, g)
	}
	ru.sq = &seq{prompt: g.promptTokens, promptHash: g.promptHash}
	ru.e.enqueue(ru.sq, time.Now())

	reason := ru.loop(ctx)
	ru.finish(reason)
	return reason
}

// loop returns the finish reason of the request.
func (ru *run) loop(ctx context.Context) string {
	if err := ru.out.start(); err != nil {
		return "abort"
	}
	var (
		deadline time.Time
		pc       <-chan struct{}
		admitted time.Time
		sched    = true // must (re)schedule before the next token
	)
	for ru.tokens < ru.g.target {
		if sched {
			var err error
			admitted, pc, err = ru.e.waitRunning(ctx, ru.s.done, ru.sq)
			if err != nil {
				return "abort"
			}
			// Prefill (or recompute after preemption) of the whole context;
			// a remote prefill's first token is one decode step away.
			if ru.remote && ru.tokens == 0 {
				deadline = admitted.Add(ru.jitter(ru.k.ITL))
			} else {
				deadline = admitted.Add(ru.jitter(ru.k.TTFT + ru.k.PrefillPerToken*time.Duration(ru.g.promptTokens+ru.tokens)))
			}
			sched = false
		}
		if ru.fault != "" && ru.tokens == ru.k.FaultAfter {
			switch ru.fault {
			case FaultStall:
				select {
				case <-ctx.Done():
				case <-ru.s.done:
				}
				return "abort"
			case FaultCutStream:
				return "abort"
			case FaultErrorEvent:
				_ = ru.out.errorEvent("Simulated fault: the engine failed while generating")
				return "error"
			}
		}
		preempted, err := ru.sleepUntil(ctx, deadline, pc)
		if err != nil {
			return "abort"
		}
		if preempted || !ru.e.commitToken(ru.sq, time.Now()) {
			sched = true
			continue
		}
		ru.tokens++
		n := ru.tokens
		finish := ""
		if n == ru.g.target {
			finish = ru.g.finish
		}
		if n == 1 && ru.g.chat {
			if err := ru.out.first(); err != nil {
				ru.countToken(time.Now(), admitted)
				return "abort"
			}
		}
		var werr error
		switch {
		case ru.fault == FaultMalformedChunk && n == ru.k.FaultAfter+1:
			werr = ru.out.malformed(n)
		case ru.fault == FaultHugeLine && n == ru.k.FaultAfter+1:
			werr = ru.out.token(n, finish, hugeText(ru.s.cfg.HugeLineBytes))
		case ru.g.script != nil && ru.g.script.tool != nil:
			werr = ru.out.toolCall(n, finish, ru.g.script)
		case ru.g.script != nil:
			werr = ru.out.token(n, finish, ru.g.script.pieces[n-1])
		default:
			werr = ru.out.token(n, finish, quotedTokens[tokenWord(ru.g.promptHash, n)])
		}
		now := time.Now()
		ru.countToken(now, admitted)
		if werr != nil {
			return "abort"
		}
		running := ru.e.nRunning.Load()
		if running < 1 {
			running = 1
		}
		itl := time.Duration(float64(ru.k.ITL) * (1 + ru.k.BatchSlowdown*float64(running-1)))
		deadline = deadline.Add(ru.jitter(itl))
		// Pick up /admin/config changes between tokens.
		ru.k = ru.s.currentKnobs()
	}
	if err := ru.out.end(ru.g.promptTokens, ru.tokens); err != nil {
		return "abort"
	}
	return ru.g.finish
}

// countToken updates the token counters and per-token histograms right
// after token ru.tokens was flushed at now.
func (ru *run) countToken(now, admitted time.Time) {
	m := ru.e.m
	m.genTokens.add(1)
	if ru.tokens == 1 {
		ru.firstT, ru.admitT = now, admitted
		m.promptTokens.add(ru.g.promptTokens)
		// cachedHits was set at admission, which waitRunning synchronised with.
		if ru.remote {
			m.kv.externalTokens.add(ru.g.promptTokens - ru.sq.cachedHits)
		} else {
			m.promptComputed.add(ru.g.promptTokens - ru.sq.cachedHits)
		}
		m.iterationTokens.observe(float64(ru.g.promptTokens + 1))
		m.ttft.observe(now.Sub(ru.g.arrival).Seconds())
	} else {
		m.iterationTokens.observe(1)
		m.itl.observe(now.Sub(ru.lastT).Seconds())
	}
	ru.lastT = now
}

// finish releases the engine slot and records the per-request metrics.
func (ru *run) finish(reason string) {
	now := time.Now()
	ru.e.finish(ru.sq, now)
	if ru.s.tracer != nil && ru.g.stream {
		ru.s.tracer.flush()
	}
	if reason == "tool_calls" {
		reason = "stop" // the API's finish_reason; the engine stopped at EOS
	}
	if reason == "error" && ru.s.cfg.MetricsNames != MetricsV1 {
		reason = "abort"
	}
	m := ru.e.m
	m.success[reason].add(1)
	ru.countSpecDecode(m)
	sq := ru.sq // done: no other goroutine touches it any more
	hits := sq.cachedHits
	end := now
	if ru.tokens > 0 {
		end = ru.lastT
	}
	e2e := end.Sub(ru.g.arrival).Seconds()
	var prefill, decode, inference, tpot float64
	if ru.tokens > 0 {
		prefill = ru.firstT.Sub(ru.admitT).Seconds()
		decode = ru.lastT.Sub(ru.firstT).Seconds()
		inference = ru.lastT.Sub(ru.admitT).Seconds()
		if ru.tokens > 1 {
			tpot = (e2e - ru.firstT.Sub(ru.g.arrival).Seconds()) / float64(ru.tokens-1)
		}
	}
	m.e2e.observe(e2e)
	m.queue.observe(sq.queueTotal.Seconds())
	m.prefill.observe(prefill)
	m.decode.observe(decode)
	m.inference.observe(inference)
	m.tpot.observe(tpot)
	m.reqPromptTokens.observe(float64(ru.g.promptTokens))
	m.reqGenTokens.observe(float64(ru.tokens))
	m.reqMaxGenTokens.observe(float64(ru.tokens))
	m.reqParamsN.observe(1)
	m.reqMaxTokens.observe(float64(ru.g.maxTokens))
	m.reqPrefillKV.observe(float64(ru.g.promptTokens - hits))
	m.reqPreemptions.observe(float64(sq.preemptions))
}

func hugeText(n int) []byte {
	b := make([]byte, 0, n+2)
	b = append(b, '"')
	b = append(b, strings.Repeat("x", n)...)
	return append(b, '"')
}

// countSpecDecode counts the speculative decoding of a finished request:
// each draft proposes SpecDecodeTokens tokens of which SpecAcceptRate are
// accepted, and a step emits the accepted tokens plus the one the target
// model samples; so ceil(generated / (1 + accepted per draft)) drafts.
func (ru *run) countSpecDecode(m *engineMetrics) {
	k := ru.s.cfg.SpecDecodeTokens
	if k <= 0 || ru.tokens <= 0 {
		return
	}
	perDraft := float64(k) * ru.s.cfg.SpecAcceptRate
	drafts := int(math.Ceil(float64(ru.tokens) / (1 + perDraft)))
	m.specDrafts.add(drafts)
	m.specDraftTokens.add(drafts * k)
	m.specAccepted.add(int(math.Round(float64(drafts) * perDraft)))
}
