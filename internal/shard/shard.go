// Package shard splits targets over the replicas of a sharded deployment
// (--shard.count, --shard.index) by rendezvous hashing of their names.
package shard

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/vllm-prober/vllm_prober/config"
)

// IndexEnv is the environment variable the shard index defaults from.
const IndexEnv = "SHARD_INDEX"

// Targets returns the targets replica index of count owns, in their order. Every
// target belongs to exactly one of the count shards, by rendezvous
// (highest-random-weight) hashing of its name: the shard whose hash with the
// name is highest owns it. The owner depends only on the name and count, so
// replicas agree without talking to each other, and going from N to N+1 shards
// moves only the targets the new shard wins, about 1/(N+1) of them.
//
// A count below 2 returns targets itself; an index outside [0, count) keeps none
// (see Validate).
func Targets(targets []config.Target, count, index int) []config.Target {
	if count < 2 {
		return targets
	}
	var out []config.Target
	for _, t := range targets {
		if Of(t.Name, count) == index {
			out = append(out, t)
		}
	}
	return out
}

// Of returns the shard, in [0, count), that owns the target called name.
func Of(name string, count int) int {
	best, bestWeight := 0, uint64(0)
	for i := 0; i < count; i++ {
		if w := weight(name, i); i == 0 || w > bestWeight {
			best, bestWeight = i, w
		}
	}
	return best
}

// weight is the rendezvous weight of shard i for name: FNV-1a of both, then
// the splitmix64 finaliser, since FNV alone mixes its last bytes poorly.
func weight(name string, shard int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	var b [9]byte // a 0 separator, then the shard number
	binary.LittleEndian.PutUint64(b[1:], uint64(shard))
	h.Write(b[:])
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Validate checks a shard count and index.
func Validate(count, index int) error {
	if count < 1 {
		return fmt.Errorf("shard count must be at least 1, got %d", count)
	}
	if index < 0 || index >= count {
		return fmt.Errorf("shard index %d is out of range for shard count %d (want 0 to %d)", index, count, count-1)
	}
	return nil
}

// ordinalRE matches the ordinal suffix a StatefulSet gives its pods' names.
var ordinalRE = regexp.MustCompile(`-([0-9]+)$`)

// IndexFromEnv returns the default shard index: env SHARD_INDEX when set,
// else the ordinal suffix "-N" of the hostname's first label (a StatefulSet pod
// "vllm-prober-2" is shard 2), else 0.
func IndexFromEnv(hostname string, env func(string) string) (int, error) {
	if v := strings.TrimSpace(env(IndexEnv)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a non-negative integer", IndexEnv, v)
		}
		return n, nil
	}
	host, _, _ := strings.Cut(hostname, ".")
	if m := ordinalRE.FindStringSubmatch(host); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return 0, fmt.Errorf("hostname %q: ordinal %q is out of range", hostname, m[1])
		}
		return n, nil
	}
	return 0, nil
}
