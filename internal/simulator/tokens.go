package simulator

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
)

// charsPerToken approximates a BPE tokenizer: a text prompt of n bytes
// counts as ceil(n/4) tokens (at least 1). A prompt given as a list of
// token ids counts exactly.
const charsPerToken = 4

func countTextTokens(nbytes int) int {
	if nbytes <= 0 {
		return 1
	}
	return (nbytes + charsPerToken - 1) / charsPerToken
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// words feed the deterministic generated text; each token is one word.
var words = []string{
	"the", "model", "streams", "tokens", "while", "the", "scheduler", "batches", "requests",
	"and", "the", "cache", "holds", "keys", "for", "every", "sequence", "in", "flight",
	"latency", "grows", "with", "load", "so", "probes", "measure", "what", "users", "see",
	"under", "real", "traffic", "of", "a", "busy", "server", "that", "never", "sleeps",
}

// quotedTokens[i] is the JSON string literal of the text of a token using
// words[i]; a leading space separates words, like most BPE vocabularies.
var quotedTokens = func() [][]byte {
	out := make([][]byte, len(words))
	for i, w := range words {
		b, _ := json.Marshal(" " + w)
		out[i] = b
	}
	return out
}()

// tokenWord is the index into words of the k-th (1-based) generated token.
func tokenWord(seed uint64, k int) int {
	return int((seed + uint64(k)*7) % uint64(len(words)))
}

// naturalLength is where generation "hits EOS" when ignore_eos is false:
// a deterministic 16..255 tokens derived from the prompt.
func naturalLength(seed uint64) int { return 16 + int(seed%240) }

func appendInt(b []byte, v int) []byte { return strconv.AppendInt(b, int64(v), 10) }

// TextTokens is the simulator's token count of a prompt text, for a test's
// router that decides as the engine counts (simtest.PDProxy).
func TextTokens(text string) int { return countTextTokens(len(text)) }
