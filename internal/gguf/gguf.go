// Package gguf writes tiny llama-architecture models in the GGUF v3 format
// (ggml's file format, read by llama.cpp and Ollama) for tests that need a
// real engine to load something: random seeded weights, a ~700-token
// SentencePiece vocabulary that tokenizes any text, and a ChatML chat
// template. Standard library only.
//
// The output rows of the control and byte tokens are zero, so greedy decoding
// never picks end-of-sequence or a lone byte: a generation is word pieces
// (valid UTF-8) and always runs to max_tokens, even on an engine that ignores
// ignore_eos.
//
// The format (little-endian): magic "GGUF", version 3, tensor count, key-value
// count, the key-values, the tensor infos (name, dims with ne0 first, type,
// offset into the data), padding to the alignment, then each tensor's data
// padded to the alignment. See ggml's docs/gguf.md.
package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
)

// Model describes the model to write.
type Model struct {
	Name    string // general.name
	Embd    int    // embedding_length
	Layers  int    // block_count
	Heads   int    // attention.head_count (= head_count_kv)
	FF      int    // feed_forward_length
	Context int    // context_length
	F16     bool   // matrices in F16 (norms stay F32)
	Seed    uint64
}

// Tiny is a 203k-parameter model (0.8 MB) for protocol tests: well under a
// millisecond to a few per token.
func Tiny() Model {
	return Model{Name: "tiny", Embd: 64, Layers: 2, Heads: 4, FF: 192, Context: 4096, Seed: 1}
}

// Small is a 26M-parameter F16 model (53 MB) whose 5-10 ms per token on a
// CPU stand well above HTTP overhead, for latency comparisons.
func Small() Model {
	return Model{Name: "small", Embd: 512, Layers: 8, Heads: 8, FF: 1408, Context: 4096, F16: true, Seed: 1}
}

// ChatTemplate is the ChatML template (with <|im_start|>/<|im_end|> control
// tokens) that the model carries as tokenizer.chat_template.
const ChatTemplate = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
const (
	TypeNormal  = 1
	TypeUnknown = 2
	TypeControl = 3
	TypeByte    = 6
)

// Special token ids.
const (
	UnkID = 0
	BOSID = 1
	EOSID = 2
)

// words are the English words whose every ▁-prefixed prefix is a token.
var words = []string{
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
	"he", "this", "are", "or", "his", "from", "at", "but", "have", "an", "had", "they", "you", "were",
	"one", "all", "we", "can", "her", "has", "been", "if", "more", "when", "will", "would",
	"who", "so", "no", "she", "its", "may", "what", "them", "than", "some", "him", "time",
	"into", "only", "do", "new", "about", "two", "then", "also", "any", "like",
	"over", "well", "many", "most", "made", "make", "way", "each", "work",
	"under", "world", "water", "server", "model", "token", "request",
	"probe", "metric", "cache", "queue", "latency", "stream", "answer", "question", "prompt", "write",
	"short", "story", "cat", "dog", "city", "night", "morning",
	"light", "blue", "red", "small", "large", "quick", "brown", "fox", "jumps", "lazy", "tell",
	"me", "please", "hello", "say", "word", "count", "list", "name", "today", "function",
	"call", "tool", "json", "value", "true", "false", "null", "field",
	"reply", "user", "data", "test", "check", "health", "ready",
	"live", "engine", "batch", "slot", "run", "wait", "long", "fast", "slow", "good", "bad", "day",
	"year", "book", "tree", "sun", "moon", "star", "sea", "road", "car", "song",
}

// Vocab returns the tokens, their scores and types, in id order.
func Vocab() (tokens []string, scores []float32, types []int32) {
	add := func(tok string, score float32, typ int32) {
		tokens = append(tokens, tok)
		scores = append(scores, score)
		types = append(types, typ)
	}
	add("<unk>", 0, TypeUnknown)
	add("<s>", 0, TypeControl)
	add("</s>", 0, TypeControl)
	add("<|im_start|>", 0, TypeControl)
	add("<|im_end|>", 0, TypeControl)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, TypeByte)
	}
	seen := map[string]bool{}
	piece := func(p string) {
		if !seen[p] {
			seen[p] = true
			// A longer piece scores higher, so SentencePiece's merges prefer it.
			add(p, float32(len([]rune(p))), TypeNormal)
		}
	}
	piece("▁")
	for c := byte('!'); c <= '~'; c++ {
		piece(string(c))
	}
	for _, w := range words {
		r := []rune("▁" + w)
		for n := 2; n <= len(r); n++ {
			piece(string(r[:n]))
		}
	}
	return tokens, scores, types
}

// Params returns the model's parameter count.
func (m Model) Params() int64 {
	var n int64
	for _, t := range m.tensors(len(mustVocab())) {
		n += int64(t.ne0) * int64(t.ne1)
	}
	return n
}

func mustVocab() []string { t, _, _ := Vocab(); return t }

const alignment = 32

// Value types of a key-value.
const (
	tUint32  = 4
	tInt32   = 5
	tFloat32 = 6
	tBool    = 7
	tString  = 8
	tArray   = 9
)

// Tensor types.
const (
	ggmlF32 = 0
	ggmlF16 = 1
)

type tensor struct {
	name     string
	ne0, ne1 int // ne1 = 1 for a vector
	norm     bool
}

func (t tensor) dims() []uint64 {
	if t.ne1 == 1 && t.norm {
		return []uint64{uint64(t.ne0)}
	}
	return []uint64{uint64(t.ne0), uint64(t.ne1)}
}

func (m Model) tensors(vocab int) []tensor {
	e, f := m.Embd, m.FF
	ts := []tensor{{name: "token_embd.weight", ne0: e, ne1: vocab}}
	for i := 0; i < m.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			tensor{name: p + "attn_norm.weight", ne0: e, ne1: 1, norm: true},
			tensor{name: p + "attn_q.weight", ne0: e, ne1: e},
			tensor{name: p + "attn_k.weight", ne0: e, ne1: e},
			tensor{name: p + "attn_v.weight", ne0: e, ne1: e},
			tensor{name: p + "attn_output.weight", ne0: e, ne1: e},
			tensor{name: p + "ffn_norm.weight", ne0: e, ne1: 1, norm: true},
			tensor{name: p + "ffn_gate.weight", ne0: e, ne1: f},
			tensor{name: p + "ffn_up.weight", ne0: e, ne1: f},
			tensor{name: p + "ffn_down.weight", ne0: f, ne1: e},
		)
	}
	return append(ts,
		tensor{name: "output_norm.weight", ne0: e, ne1: 1, norm: true},
		tensor{name: "output.weight", ne0: e, ne1: vocab})
}

func (m Model) typeOf(t tensor) uint32 {
	if m.F16 && !t.norm {
		return ggmlF16
	}
	return ggmlF32
}

func (m Model) validate() error {
	if m.Embd <= 0 || m.Layers <= 0 || m.Heads <= 0 || m.FF <= 0 || m.Context <= 0 {
		return fmt.Errorf("gguf: model %q: every size must be positive", m.Name)
	}
	if m.Embd%m.Heads != 0 || (m.Embd/m.Heads)%2 != 0 {
		return fmt.Errorf("gguf: model %q: embedding %d must split into %d heads of an even size", m.Name, m.Embd, m.Heads)
	}
	return nil
}

// WriteFile writes the model to path.
func (m Model) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := m.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	return nil
}

// Write writes the model in GGUF v3.
func (m Model) Write(dst io.Writer) error {
	if err := m.validate(); err != nil {
		return err
	}
	tokens, scores, types := Vocab()
	head := m.Embd / m.Heads
	kvs := []kv{
		{"general.architecture", tString, "llama"},
		{"general.name", tString, m.Name},
		{"general.alignment", tUint32, uint32(alignment)},
		{"llama.context_length", tUint32, uint32(m.Context)},
		{"llama.embedding_length", tUint32, uint32(m.Embd)},
		{"llama.block_count", tUint32, uint32(m.Layers)},
		{"llama.feed_forward_length", tUint32, uint32(m.FF)},
		{"llama.attention.head_count", tUint32, uint32(m.Heads)},
		{"llama.attention.head_count_kv", tUint32, uint32(m.Heads)},
		{"llama.attention.key_length", tUint32, uint32(head)},
		{"llama.attention.value_length", tUint32, uint32(head)},
		{"llama.rope.dimension_count", tUint32, uint32(head)},
		{"llama.rope.freq_base", tFloat32, float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", tFloat32, float32(1e-5)},
		{"llama.vocab_size", tUint32, uint32(len(tokens))},
		{"tokenizer.ggml.model", tString, "llama"},
		{"tokenizer.ggml.tokens", tArray, tokens},
		{"tokenizer.ggml.scores", tArray, scores},
		{"tokenizer.ggml.token_type", tArray, types},
		{"tokenizer.ggml.bos_token_id", tUint32, uint32(BOSID)},
		{"tokenizer.ggml.eos_token_id", tUint32, uint32(EOSID)},
		{"tokenizer.ggml.unknown_token_id", tUint32, uint32(UnkID)},
		{"tokenizer.ggml.add_bos_token", tBool, true},
		{"tokenizer.ggml.add_eos_token", tBool, false},
		{"tokenizer.chat_template", tString, ChatTemplate},
	}
	ts := m.tensors(len(tokens))
	w := &writer{w: bufio.NewWriterSize(dst, 1<<20)}
	w.raw([]byte("GGUF"))
	w.u32(3)
	w.u64(uint64(len(ts)))
	w.u64(uint64(len(kvs)))
	for _, e := range kvs {
		w.str(e.key)
		w.value(e.typ, e.val)
	}
	var off uint64
	sizes := make([]uint64, len(ts))
	for i, t := range ts {
		w.str(t.name)
		d := t.dims()
		w.u32(uint32(len(d)))
		for _, n := range d {
			w.u64(n)
		}
		typ := m.typeOf(t)
		w.u32(typ)
		w.u64(off)
		size := uint64(t.ne0 * t.ne1 * 4)
		if typ == ggmlF16 {
			size /= 2
		}
		sizes[i] = size
		off += pad(size)
	}
	w.pad()
	rng := rand.New(rand.NewPCG(m.Seed, 0x6767756620763300))
	var row []byte
	for i, t := range ts {
		typ := m.typeOf(t)
		std := 1 / math.Sqrt(float64(t.ne0))
		size := 4
		if typ == ggmlF16 {
			size = 2
		}
		row = slices.Grow(row[:0], t.ne0*size)[:t.ne0*size]
		for r := 0; r < t.ne1; r++ {
			zero := t.name == "output.weight" && (types[r] == TypeControl || types[r] == TypeByte || types[r] == TypeUnknown)
			for c := 0; c < t.ne0; c++ {
				v := float32(1)
				if !t.norm {
					// Draw even for a zeroed row, so the other rows do not depend on which are zero.
					v = float32(rng.NormFloat64() * std)
					if zero {
						v = 0
					}
				}
				if typ == ggmlF16 {
					binary.LittleEndian.PutUint16(row[c*2:], f16(v))
				} else {
					binary.LittleEndian.PutUint32(row[c*4:], math.Float32bits(v))
				}
			}
			w.raw(row)
			if w.err != nil {
				return w.err
			}
		}
		w.zeros(pad(sizes[i]) - sizes[i])
	}
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

type kv struct {
	key string
	typ uint32
	val any
}

func pad(n uint64) uint64 { return (n + alignment - 1) / alignment * alignment }

type writer struct {
	w   *bufio.Writer
	n   uint64
	err error
	b   [8]byte
}

func (w *writer) raw(p []byte) {
	if w.err != nil {
		return
	}
	n, err := w.w.Write(p)
	w.n += uint64(n)
	w.err = err
}

func (w *writer) u32(v uint32) { binary.LittleEndian.PutUint32(w.b[:4], v); w.raw(w.b[:4]) }
func (w *writer) u64(v uint64) { binary.LittleEndian.PutUint64(w.b[:8], v); w.raw(w.b[:8]) }
func (w *writer) str(s string) { w.u64(uint64(len(s))); w.raw([]byte(s)) }
func (w *writer) zeros(n uint64) {
	for ; n > 0; n-- {
		w.raw([]byte{0})
	}
}
func (w *writer) pad() { w.zeros(pad(w.n) - w.n) }

func (w *writer) value(typ uint32, v any) {
	w.u32(typ)
	switch x := v.(type) {
	case string:
		w.str(x)
	case uint32:
		w.u32(x)
	case float32:
		w.u32(math.Float32bits(x))
	case bool:
		if x {
			w.raw([]byte{1})
		} else {
			w.raw([]byte{0})
		}
	case []string:
		w.u32(tString)
		w.u64(uint64(len(x)))
		for _, s := range x {
			w.str(s)
		}
	case []float32:
		w.u32(tFloat32)
		w.u64(uint64(len(x)))
		for _, f := range x {
			w.u32(math.Float32bits(f))
		}
	case []int32:
		w.u32(tInt32)
		w.u64(uint64(len(x)))
		for _, i := range x {
			w.u32(uint32(i))
		}
	default:
		if w.err == nil {
			w.err = fmt.Errorf("gguf: no encoding for %T", v)
		}
	}
}

// f16 converts to IEEE half precision, rounding to nearest even; the weights
// here are far from overflow and underflow, which saturate and flush to zero.
func f16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		return sign
	}
	h := uint32(exp)<<10 | mant>>13
	rest := mant & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, which is right
	}
	return sign | uint16(h)
}

// Header is what ReadHeader parses: the key-values and the tensor infos.
type Header struct {
	Version uint32
	KV      map[string]any // string, uint32, int32, float32, bool, []string, []float32, []int32
	Tensors []TensorInfo
	// DataOffset is where the tensor data starts in the file.
	DataOffset int64
}

// TensorInfo is one tensor's entry in the header.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   uint32
	Offset uint64 // from DataOffset
}

// Keys returns the header's keys, sorted.
func (h *Header) Keys() []string {
	ks := make([]string, 0, len(h.KV))
	for k := range h.KV {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ReadHeader parses a GGUF header holding the value types this package writes.
func ReadHeader(r io.Reader) (*Header, error) {
	rd := &reader{r: bufio.NewReader(r)}
	magic := rd.bytes(4)
	if rd.err == nil && string(magic) != "GGUF" {
		return nil, fmt.Errorf("gguf: bad magic %q", magic)
	}
	h := &Header{Version: rd.u32(), KV: map[string]any{}}
	nt, nkv := rd.u64(), rd.u64()
	if rd.err == nil && (nt > 1<<20 || nkv > 1<<20) {
		return nil, fmt.Errorf("gguf: implausible counts: %d tensors, %d key-values", nt, nkv)
	}
	align := uint64(alignment)
	for i := uint64(0); i < nkv && rd.err == nil; i++ {
		k := rd.str()
		h.KV[k] = rd.value(rd.u32())
		if a, ok := h.KV[k].(uint32); ok && k == "general.alignment" && a > 0 {
			align = uint64(a)
		}
	}
	for i := uint64(0); i < nt && rd.err == nil; i++ {
		t := TensorInfo{Name: rd.str()}
		nd := rd.u32()
		for j := uint32(0); j < nd && j < 4; j++ {
			t.Dims = append(t.Dims, rd.u64())
		}
		t.Type, t.Offset = rd.u32(), rd.u64()
		h.Tensors = append(h.Tensors, t)
	}
	if rd.err != nil {
		return nil, fmt.Errorf("gguf: reading the header: %w", rd.err)
	}
	h.DataOffset = int64((rd.n + align - 1) / align * align)
	return h, nil
}

type reader struct {
	r   *bufio.Reader
	n   uint64
	err error
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > 1<<24 {
		r.err = fmt.Errorf("a %d-byte field", n)
		return nil
	}
	p := make([]byte, n)
	_, r.err = io.ReadFull(r.r, p)
	r.n += n
	return p
}

func (r *reader) u32() uint32 {
	p := r.bytes(4)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (r *reader) u64() uint64 {
	p := r.bytes(8)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (r *reader) str() string { return string(r.bytes(r.u64())) }

func (r *reader) value(typ uint32) any {
	switch typ {
	case tString:
		return r.str()
	case tUint32:
		return r.u32()
	case tInt32:
		return int32(r.u32())
	case tFloat32:
		return math.Float32frombits(r.u32())
	case tBool:
		p := r.bytes(1)
		return p != nil && p[0] != 0
	case tArray:
		et, n := r.u32(), r.u64()
		if n > 1<<20 {
			r.err = fmt.Errorf("an array of %d", n)
			return nil
		}
		switch et {
		case tString:
			a := make([]string, 0, n)
			for i := uint64(0); i < n && r.err == nil; i++ {
				a = append(a, r.str())
			}
			return a
		case tFloat32:
			a := make([]float32, 0, n)
			for i := uint64(0); i < n && r.err == nil; i++ {
				a = append(a, math.Float32frombits(r.u32()))
			}
			return a
		case tInt32:
			a := make([]int32, 0, n)
			for i := uint64(0); i < n && r.err == nil; i++ {
				a = append(a, int32(r.u32()))
			}
			return a
		}
		r.err = fmt.Errorf("an array of value type %d", et)
	default:
		if r.err == nil {
			r.err = fmt.Errorf("value type %d", typ)
		}
	}
	return nil
}
