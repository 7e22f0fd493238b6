package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/vllm-prober/vllm_prober/internal/shard"
)

// Flagger is what kingpin's Application and CmdClause have in common.
type Flagger interface {
	Flag(name, help string) *kingpin.FlagClause
}

// ShardFlags are the --shard.count and --shard.index flags.
type ShardFlags struct {
	Count int
	// Index is kept as text: empty means "derive it", and Kubernetes leaves
	// "$(SHARD_INDEX)" unexpanded when the variable is missing, which deserves
	// a clear error rather than a flag parse failure.
	Index string
}

// addShardFlags registers --shard.count and --shard.index on app.
func addShardFlags(app Flagger) *ShardFlags {
	f := &ShardFlags{}
	app.Flag("shard.count", "Number of replicas the targets are split over by a stable hash of their name; each replica probes only its share.").
		Default("1").IntVar(&f.Count)
	app.Flag("shard.index", "This replica's shard, 0 to --shard.count minus 1. Default: $"+shard.IndexEnv+", else the StatefulSet ordinal at the end of the hostname (name-N), else 0.").
		StringVar(&f.Index)
	return f
}

// Resolve returns the validated shard count and index. hostname and env
// (os.Hostname, os.Getenv in main) provide the defaults of an unset index.
func (f *ShardFlags) Resolve(hostname string, env func(string) string) (count, index int, err error) {
	count = f.Count
	if count < 1 {
		return 0, 0, fmt.Errorf("--shard.count must be at least 1, got %d", count)
	}
	switch {
	case strings.TrimSpace(f.Index) != "":
		v := strings.TrimSpace(f.Index)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, fmt.Errorf("--shard.index %q is not a non-negative integer", v)
		}
		index = n
	case count == 1:
		// One shard: a hostname such as "probe-host-3" must not matter.
		index = 0
	default:
		if index, err = shard.IndexFromEnv(hostname, env); err != nil {
			return 0, 0, fmt.Errorf("--shard.index: %w", err)
		}
	}
	if err := shard.Validate(count, index); err != nil {
		return 0, 0, err
	}
	return count, index, nil
}
