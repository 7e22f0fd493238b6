package gguf

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"
)

// TestTinyRoundTrip writes the tiny model and parses its header back: the
// keys llama.cpp requires, the vocabulary, every tensor's shape and offset,
// and a file size that the tensor infos account for to the byte.
func TestTinyRoundTrip(t *testing.T) {
	m := Tiny()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ReadHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 3 {
		t.Errorf("version %d, want 3", h.Version)
	}
	tokens, _, types := Vocab()
	want := map[string]any{
		"general.architecture":          "llama",
		"llama.embedding_length":        uint32(64),
		"llama.block_count":             uint32(2),
		"llama.attention.head_count":    uint32(4),
		"llama.attention.head_count_kv": uint32(4),
		"llama.rope.dimension_count":    uint32(16),
		"llama.vocab_size":              uint32(len(tokens)),
		"tokenizer.ggml.model":          "llama",
		"tokenizer.ggml.eos_token_id":   uint32(EOSID),
		"tokenizer.ggml.add_bos_token":  true,
		"tokenizer.chat_template":       ChatTemplate,
	}
	for k, v := range want {
		if h.KV[k] != v {
			t.Errorf("%s = %#v, want %#v", k, h.KV[k], v)
		}
	}
	if got := h.KV["tokenizer.ggml.tokens"].([]string); !slices.Equal(got, tokens) {
		t.Errorf("tokens differ after the round trip: %d, want %d", len(got), len(tokens))
	}
	if got := h.KV["tokenizer.ggml.token_type"].([]int32); !slices.Equal(got, types) {
		t.Errorf("token types differ after the round trip")
	}
	if n := len(tokens); n < 600 || n > 800 {
		t.Errorf("vocabulary of %d tokens, want about 700", n)
	}
	if len(h.Tensors) != 2+9*m.Layers+1 {
		t.Fatalf("%d tensors, want %d", len(h.Tensors), 2+9*m.Layers+1)
	}
	last := h.Tensors[len(h.Tensors)-1]
	if last.Name != "output.weight" || !slices.Equal(last.Dims, []uint64{64, uint64(len(tokens))}) {
		t.Errorf("last tensor %s %v, want output.weight [64 %d]", last.Name, last.Dims, len(tokens))
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	end := uint64(h.DataOffset) + last.Offset + pad(last.Dims[0]*last.Dims[1]*4)
	if uint64(st.Size()) != end {
		t.Errorf("file is %d bytes, the header accounts for %d", st.Size(), end)
	}
	if p, want := m.Params(), int64(2*64*len(tokens)+2*(2*64+4*64*64+3*64*192)+64); p != want {
		t.Errorf("tiny has %d parameters, want %d", p, want)
	}
	if st.Size() > 1<<20 {
		t.Errorf("tiny is %d bytes, want under 1 MiB", st.Size())
	}

	// The output rows of every control, byte and unknown token are zero, the
	// others are not: greedy decoding can only emit word pieces.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data := raw[uint64(h.DataOffset)+last.Offset:]
	for id, typ := range types {
		row := data[id*64*4 : (id+1)*64*4]
		zero := bytes.Count(row, []byte{0}) == len(row)
		if want := typ != TypeNormal; zero != want {
			t.Errorf("output row of token %d %q (type %d): zero %v, want %v", id, tokens[id], typ, zero, want)
		}
	}
}

// TestDeterministic: the same seed writes the same bytes, another seed other weights.
func TestDeterministic(t *testing.T) {
	sum := func(m Model) [32]byte {
		var b bytes.Buffer
		if err := m.Write(&b); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b.Bytes())
	}
	a, b := sum(Tiny()), sum(Tiny())
	if a != b {
		t.Error("two writes of the same model differ")
	}
	m := Tiny()
	m.Seed = 2
	if sum(m) == a {
		t.Error("another seed wrote the same weights")
	}
}

// TestSmallF16 checks the small model's size, as its header accounts for
// it, and that its matrices are F16 and its norms F32. Only the header is
// kept: the writer stops at the first failed write.
func TestSmallF16(t *testing.T) {
	w := &headOnly{max: 1 << 20}
	if err := Small().Write(w); !errors.Is(err, errFull) {
		t.Fatalf("write: %v, want the test writer's %v", err, errFull)
	}
	h, err := ReadHeader(bytes.NewReader(w.buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	last := h.Tensors[len(h.Tensors)-1]
	if n := uint64(h.DataOffset) + last.Offset + pad(last.Dims[0]*last.Dims[1]*2); n < 50e6 || n > 56e6 {
		t.Errorf("small is %d bytes, want about 53 MB", n)
	}
	if p := Small().Params(); p < 26e6 || p > 27e6 {
		t.Errorf("small has %d parameters, want about 26.5M", p)
	}
	for _, ti := range h.Tensors {
		want := uint32(ggmlF16)
		if len(ti.Dims) == 1 {
			want = ggmlF32
		}
		if ti.Type != want {
			t.Errorf("%s: type %d, want %d", ti.Name, ti.Type, want)
		}
	}
}

var errFull = errors.New("test writer full")

// headOnly keeps the first max bytes written and fails every write after.
type headOnly struct {
	buf bytes.Buffer
	max int
}

func (w *headOnly) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, errFull
	}
	return w.buf.Write(p)
}

func TestVocabPieces(t *testing.T) {
	tokens, scores, types := Vocab()
	seen := map[string]bool{}
	for i, tok := range tokens {
		if seen[tok] {
			t.Errorf("token %q twice", tok)
		}
		seen[tok] = true
		if !utf8.ValidString(tok) {
			t.Errorf("token %d is not UTF-8", i)
		}
		if types[i] == TypeNormal && scores[i] != float32(utf8.RuneCountInString(tok)) {
			t.Errorf("token %q scores %v, want its length", tok, scores[i])
		}
	}
	for _, p := range []string{"▁", "a", "~", "▁c", "▁ca", "▁cat", "▁latency", "<0x0A>", "<|im_end|>"} {
		if !seen[p] {
			t.Errorf("no token %q", p)
		}
	}
}

func TestF16(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff}, {1e6, 0x7c00}, {1e-9, 0}} {
		if got := f16(c.f); got != c.want {
			t.Errorf("f16(%v) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	// Round trip of a value with more precision than half holds: within half's step.
	v := float32(0.1234567)
	h := f16(v)
	back := math.Ldexp(1+float64(h&0x3ff)/1024, int(h>>10&0x1f)-15)
	if math.Abs(back-float64(v)) > 1e-4 {
		t.Errorf("f16(%v) reads back as %v", v, back)
	}
}

func TestReadHeaderRejects(t *testing.T) {
	if _, err := ReadHeader(bytes.NewReader([]byte("GGML\x03\x00\x00\x00"))); err == nil {
		t.Error("a bad magic parsed")
	}
	var b bytes.Buffer
	if err := Tiny().Write(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHeader(bytes.NewReader(b.Bytes()[:1000])); err == nil {
		t.Error("a truncated header parsed")
	}
}
