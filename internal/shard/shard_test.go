package shard

import (
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/vllm-prober/vllm_prober/config"
)

// fleet returns n targets named like the ones discovery produces.
func fleet(n int) []config.Target {
	ts := make([]config.Target, n)
	for i := range ts {
		switch i % 3 {
		case 0:
			ts[i].Name = fmt.Sprintf("vllm-%d", i)
		case 1:
			ts[i].Name = fmt.Sprintf("10.%d.%d.%d:8000", i/65536, i/256%256, i%256)
		default:
			ts[i].Name = fmt.Sprintf("llama-70b-%d.inference.svc:8000", i)
		}
	}
	return ts
}

func owners(ts []config.Target, count int) map[string]int {
	own := map[string]int{}
	for i := 0; i < count; i++ {
		for _, t := range Targets(ts, count, i) {
			if prev, ok := own[t.Name]; ok {
				panic(fmt.Sprintf("%s is in shards %d and %d", t.Name, prev, i))
			}
			own[t.Name] = i
		}
	}
	return own
}

func TestShardCoversEveryTargetExactlyOnce(t *testing.T) {
	ts := fleet(1000)
	seen := map[string]int{}
	for i := 0; i < 3; i++ {
		share := Targets(ts, 3, i)
		// 1000/3 = 333 with a binomial standard deviation of 15: a shard
		// outside [250, 420] means a broken hash, not bad luck.
		if len(share) < 250 || len(share) > 420 {
			t.Errorf("shard %d has %d of 1000 targets, want about 333", i, len(share))
		}
		for _, tg := range share {
			seen[tg.Name]++
		}
	}
	if len(seen) != 1000 {
		t.Errorf("%d targets covered, want 1000", len(seen))
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s is probed by %d shards", name, n)
		}
	}
}

func TestShardGrowthMovesFewTargets(t *testing.T) {
	ts := fleet(1000)
	three, four := owners(ts, 3), owners(ts, 4)
	moved := 0
	for name, o := range three {
		if four[name] != o {
			moved++
			// Rendezvous hashing only moves what the new shard wins.
			if four[name] != 3 {
				t.Errorf("%s moved from shard %d to old shard %d", name, o, four[name])
			}
		}
	}
	// A stable hash must move ~1/4 (250); 30% leaves room for chance (sd 14).
	if moved > 300 || moved < 180 {
		t.Errorf("going from 3 to 4 shards moved %d of 1000 targets, want about 250", moved)
	}

	// The contrast: hash modulo the shard count moves about 3/4 of them.
	modulo := func(name string, n int) int {
		h := fnv.New64a()
		h.Write([]byte(name))
		return int(h.Sum64() % uint64(n))
	}
	naive := 0
	for _, tg := range ts {
		if modulo(tg.Name, 3) != modulo(tg.Name, 4) {
			naive++
		}
	}
	if naive < 600 {
		t.Errorf("naive modulo sharding moved only %d of 1000 targets; the contrast does not hold", naive)
	}
	t.Logf("3 -> 4 shards: rendezvous moved %d targets, modulo would move %d", moved, naive)

	// Shrinking back from 4 to 3 moves only the removed shard's targets.
	for name, o := range four {
		if o != 3 && three[name] != o {
			t.Errorf("%s moved from shard %d to %d when shard 3 went away", name, o, three[name])
		}
	}
}

func TestShardEdges(t *testing.T) {
	ts := fleet(10)
	if got := Targets(ts, 1, 0); len(got) != 10 {
		t.Errorf("one shard kept %d of 10", len(got))
	}
	if got := Targets(ts, 0, 0); len(got) != 10 {
		t.Errorf("count 0 kept %d of 10", len(got))
	}
	if got := Targets(ts, 3, 3); len(got) != 0 {
		t.Errorf("index 3 of 3 kept %d", len(got))
	}
	// The share keeps the input order.
	all := fleet(100)
	pos := map[string]int{}
	for i, tg := range all {
		pos[tg.Name] = i
	}
	share := Targets(all, 2, 1)
	for i := 1; i < len(share); i++ {
		if pos[share[i-1].Name] > pos[share[i].Name] {
			t.Errorf("Shard reordered %s and %s", share[i-1].Name, share[i].Name)
		}
	}
}

// TestShardOfIsPinned guards the assignment itself: changing the hash would
// reshuffle every running fleet on upgrade.
func TestShardOfIsPinned(t *testing.T) {
	got := []int{}
	for _, n := range []string{"vllm-0", "vllm-1", "vllm-2", "10.0.0.1:8000", "gpu-box:8000"} {
		got = append(got, Of(n, 3), Of(n, 8))
	}
	want := []int{0, 5, 2, 6, 0, 0, 0, 5, 2, 6}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ShardOf assignments = %v, want %v", got, want)
	}
}

func TestIndexFromEnv(t *testing.T) {
	for _, tc := range []struct {
		host, env string
		want      int
		err       string
	}{
		{"vllm-prober-2", "", 2, ""},
		{"vllm-prober-10.vllm-prober.monitoring.svc.cluster.local", "", 10, ""},
		{"vllm-prober-0", "", 0, ""},
		{"vllm-prober", "", 0, ""},
		{"probe-host", "", 0, ""},
		{"host-1.example-2", "", 1, ""},
		{"prober-", "", 0, ""},
		{"", "", 0, ""},
		{"vllm-prober-2", "5", 5, ""},
		{"vllm-prober-2", " 3 ", 3, ""},
		{"vllm-prober-2", "-1", 0, `SHARD_INDEX="-1" is not a non-negative integer`},
		{"vllm-prober-2", "two", 0, `SHARD_INDEX="two" is not a non-negative integer`},
		{"p-99999999999999999999999", "", 0, `hostname "p-99999999999999999999999": ordinal "99999999999999999999999" is out of range`},
	} {
		env := func(k string) string {
			if k == IndexEnv {
				return tc.env
			}
			return "unrelated"
		}
		got, err := IndexFromEnv(tc.host, env)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) || got != tc.want {
			t.Errorf("IndexFromEnv(%q, SHARD_INDEX=%q) = %d, %v; want %d, %q", tc.host, tc.env, got, err, tc.want, tc.err)
		}
	}
}

func BenchmarkShard(b *testing.B) {
	ts := fleet(1000)
	for b.Loop() {
		Targets(ts, 8, 3)
	}
}
