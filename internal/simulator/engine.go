package simulator

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

type seqState int

const (
	stateWaiting seqState = iota
	stateRunning
	stateDone
)

// seq is one request inside an engine. Every field below the comment is
// guarded by the engine's mutex.
type seq struct {
	prompt     int
	promptHash uint64

	// guarded by engine.mu
	state       seqState
	generated   int
	blocks      int
	admitCh     chan struct{} // closed when the seq is scheduled
	preemptCh   chan struct{} // closed when the running seq is preempted
	queuedAt    time.Time
	queueTotal  time.Duration
	admittedAt  time.Time
	everRan     bool
	preemptions int
	cachedHits  int
}

// engine models one vLLM EngineCore: a continuous-batching scheduler with
// at most maxNumSeqs running requests, a FIFO wait queue and a paged KV
// cache of totalBlocks blocks of blockSize tokens.
type engine struct {
	idx         int
	blockSize   int
	totalBlocks int
	m           *engineMetrics

	nRunning atomic.Int64 // mirror of len(running), read lock-free for ITL

	mu         sync.Mutex
	maxNumSeqs int
	running    []*seq // in admission order; the last is the newest
	waiting    []*seq // FIFO; preempted requests go to the front
	usedBlocks int
	prefix     prefixCache
}

func newEngine(idx, maxNumSeqs, kvTokens, blockSize, maxModelLen int, now time.Time) *engine {
	return &engine{
		idx:         idx,
		blockSize:   blockSize,
		totalBlocks: kvTokens / blockSize,
		maxNumSeqs:  maxNumSeqs,
		m:           newEngineMetrics(maxModelLen, now),
		prefix:      newPrefixCache(4096),
	}
}

func (e *engine) blocksFor(tokens int) int { return (tokens + e.blockSize - 1) / e.blockSize }

// load is vLLM's data-parallel balancing score: waiting*4 + running.
func (e *engine) load() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return 4*len(e.waiting) + len(e.running)
}

// snapshot returns the live scheduler state for gauges.
func (e *engine) snapshot() (running, waiting, usedBlocks int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running), len(e.waiting), e.usedBlocks
}

func (e *engine) setMaxNumSeqs(n int, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.maxNumSeqs = n
	e.schedule(now)
}

// enqueue adds a new request to the back of the wait queue.
func (e *engine) enqueue(s *seq, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s.state = stateWaiting
	s.admitCh = make(chan struct{})
	s.queuedAt = now
	e.waiting = append(e.waiting, s)
	e.schedule(now)
}

// schedule admits waiting requests in FIFO order while a batch slot and
// enough KV blocks (context so far plus the next token) are free.
// Called with e.mu held.
func (e *engine) schedule(now time.Time) {
	for len(e.waiting) > 0 && len(e.running) < e.maxNumSeqs {
		s := e.waiting[0]
		need := e.blocksFor(s.prompt + s.generated + 1)
		if need > e.totalBlocks-e.usedBlocks {
			return
		}
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		s.blocks = need
		e.usedBlocks += need
		s.state = stateRunning
		s.queueTotal += now.Sub(s.queuedAt)
		s.admittedAt = now
		if !s.everRan {
			s.everRan = true
			e.m.prefixQueries.add(s.prompt)
			if e.prefix.seen(s.promptHash) {
				// Full blocks are reused; the last prompt token is always recomputed.
				s.cachedHits = (s.prompt - 1) / e.blockSize * e.blockSize
				e.m.prefixHits.add(s.cachedHits)
			}
		}
		s.preemptCh = make(chan struct{})
		e.running = append(e.running, s)
		close(s.admitCh)
	}
	e.nRunning.Store(int64(len(e.running)))
}

// preempt moves a running seq back to the front of the wait queue and
// frees its blocks (recompute-style preemption). Called with e.mu held.
func (e *engine) preempt(s *seq, now time.Time) {
	e.removeRunning(s)
	e.usedBlocks -= s.blocks
	s.blocks = 0
	s.state = stateWaiting
	s.preemptions++
	s.queuedAt = now
	s.admitCh = make(chan struct{})
	close(s.preemptCh)
	e.waiting = append([]*seq{s}, e.waiting...)
	e.m.preemptions.add(1)
	e.nRunning.Store(int64(len(e.running)))
}

func (e *engine) removeRunning(s *seq) { e.running = without(e.running, s) }

// without removes s from list, keeping the order (slices.Delete clears the
// freed slot, so the engine holds no finished request).
func without(list []*seq, s *seq) []*seq {
	if i := slices.Index(list, s); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// commitToken reserves KV space for the next token of s and counts it as
// generated. When no block is free the newest running request is preempted
// until one is; if that is s itself, commitToken returns false and s is
// waiting again.
func (e *engine) commitToken(s *seq, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.state != stateRunning {
		return false
	}
	need := e.blocksFor(s.prompt + s.generated + 1)
	for s.blocks < need {
		if e.usedBlocks < e.totalBlocks {
			s.blocks++
			e.usedBlocks++
			continue
		}
		victim := e.running[len(e.running)-1]
		e.preempt(victim, now)
		if victim == s {
			return false
		}
	}
	s.generated++
	return true
}

// finish removes s from the engine and lets waiting requests in.
func (e *engine) finish(s *seq, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch s.state {
	case stateRunning:
		e.removeRunning(s)
		e.usedBlocks -= s.blocks
		s.blocks = 0
	case stateWaiting:
		e.waiting = without(e.waiting, s)
		s.queueTotal += now.Sub(s.queuedAt)
	}
	s.state = stateDone
	e.schedule(now)
}

var errClosed = errors.New("simulator closed")

// waitRunning blocks until s is running and returns when it was most
// recently scheduled and the channel that closes if it is preempted.
func (e *engine) waitRunning(ctx context.Context, done <-chan struct{}, s *seq) (time.Time, <-chan struct{}, error) {
	for {
		e.mu.Lock()
		if s.state == stateRunning {
			t, pc := s.admittedAt, s.preemptCh
			e.mu.Unlock()
			return t, pc, nil
		}
		ch := s.admitCh
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, nil, ctx.Err()
		case <-done:
			return time.Time{}, nil, errClosed
		}
	}
}

// prefixCache remembers the hashes of recent prompts (FIFO eviction).
type prefixCache struct {
	set   map[uint64]struct{}
	order []uint64
	next  int
}

func newPrefixCache(size int) prefixCache {
	return prefixCache{set: make(map[uint64]struct{}, size), order: make([]uint64, 0, size)}
}

// seen reports whether h was seen before and records it.
func (p *prefixCache) seen(h uint64) bool {
	if _, ok := p.set[h]; ok {
		return true
	}
	if len(p.order) < cap(p.order) {
		p.order = append(p.order, h)
	} else {
		delete(p.set, p.order[p.next])
		p.order[p.next] = h
		p.next = (p.next + 1) % len(p.order)
	}
	p.set[h] = struct{}{}
	return false
}
