package probe

import (
	cryptorand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"strings"
)

// promptWords feed random prompts; each is one token in common BPE vocabularies.
var promptWords = strings.Fields(`the of and to in is for on that with as it at by from this be are was or
an which one all we can has more but not what about when your their will there if so out up use time new
how any these may other than its only into over such some most data model system each user after first
well also between where both under while load cache token stream batch server queue memory latency`)

// RandomWords returns n words drawn with rng, separated by spaces: about n
// tokens of a prompt no cache has seen (bench's random prompts, a module's
// prefill_tokens prefix).
func RandomWords(rng *rand.Rand, n int) string {
	var b strings.Builder
	for j := 0; j < n; j++ {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(promptWords[rng.IntN(len(promptWords))])
	}
	return b.String()
}

// freshWords is RandomWords from a generator seeded with fresh random bits:
// a different prefix at every probe.
func freshWords(n int) string {
	var seed [16]byte
	_, _ = cryptorand.Read(seed[:])
	return RandomWords(rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))), n)
}
