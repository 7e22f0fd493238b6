package main

import (
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

func TestShardFlagsResolve(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		host, env   string
		count, want int
		err         string
	}{
		{nil, "vllm-prober-3", "", 1, 0, ""}, // one shard: the hostname does not matter
		{[]string{"--shard.count=4"}, "vllm-prober-3", "", 4, 3, ""},
		{[]string{"--shard.count=4"}, "vllm-prober-3", "1", 4, 1, ""},
		{[]string{"--shard.count=4", "--shard.index=2"}, "vllm-prober-3", "1", 4, 2, ""},
		{[]string{"--shard.count=4"}, "laptop", "", 4, 0, ""},
		{[]string{"--shard.count=3"}, "vllm-prober-3", "", 0, 0, "shard index 3 is out of range for shard count 3 (want 0 to 2)"},
		{[]string{"--shard.count=3", "--shard.index=7"}, "", "", 0, 0, "shard index 7 is out of range for shard count 3 (want 0 to 2)"},
		{[]string{"--shard.count=0"}, "", "", 0, 0, "--shard.count must be at least 1, got 0"},
		// What Kubernetes passes when the SHARD_INDEX variable is missing.
		{[]string{"--shard.count=3", "--shard.index=$(SHARD_INDEX)"}, "", "", 0, 0, `--shard.index "$(SHARD_INDEX)" is not a non-negative integer`},
		{[]string{"--shard.count=3"}, "", "x", 0, 0, `--shard.index: SHARD_INDEX="x" is not a non-negative integer`},
	} {
		app := kingpin.New("test", "")
		f := addShardFlags(app)
		if _, err := app.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		count, index, err := f.Resolve(tc.host, func(string) string { return tc.env })
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) || count != tc.count || index != tc.want {
			t.Errorf("%v host=%q SHARD_INDEX=%q: %d, %d, %v; want %d, %d, %q", tc.args, tc.host, tc.env, count, index, err, tc.count, tc.want, tc.err)
		}
	}
}
