package collector

import (
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// What one target's /metrics and /v1/models may add to vllm_prober's own
// exposition: label values a target sends (model names, finished_reason
// values, model ids) become labels of its series, so each kind is bounded per
// target, as the gateway's backends are (maxGatewayBackends). Without the
// bounds, a target naming 20,000 models made 200,000 series of one target
// and a 2 MiB model name was re-exported whole.
const (
	// MaxModels is how many models of a target's /metrics are exported, the
	// first in name order; the rest are dropped and counted.
	MaxModels = 64
	// MaxServedModels is how many model ids of a target's /v1/models are
	// kept (vllm_server_served_model_info, max_model_len), the first in name
	// order.
	MaxServedModels = 64
	// MaxFinishedReasons is how many finished_reason values of one model are
	// exported, the first in name order; the others are summed under
	// OtherLabelValue.
	MaxFinishedReasons = 16
	// MaxLabelValueBytes is the longest label value taken from a target;
	// a longer one is cut to this length (at a UTF-8 boundary), and values
	// that are equal once cut are merged.
	MaxLabelValueBytes = 256
	// OtherLabelValue is the finished_reason the values past
	// MaxFinishedReasons are summed under.
	OtherLabelValue = "_other"
)

// Kinds of the values dropped (vllm_prober_scrape_values_dropped_total).
const (
	droppedModel       = "model"
	droppedServedModel = "served_model"
	droppedReason      = "finished_reason"
)

// NewDroppedValues returns vllm_prober_scrape_values_dropped_total, for
// Options.DroppedValues, each kind at 0 from the start so that increase()
// sees its first drop. The caller registers it.
func NewDroppedValues() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm_prober_scrape_values_dropped_total",
		Help: "Label values a target sent that were left out at a scrape to bound the series of one target: models of /metrics past " +
			"the first 64, model ids of /v1/models past the first 64 (kind served_model), finished_reason values of a model past the first 16 (summed under _other).",
	}, []string{"kind"})
	for _, kind := range []string{droppedModel, droppedServedModel, droppedReason} {
		c.WithLabelValues(kind)
	}
	return c
}

// cutLabel cuts v to MaxLabelValueBytes at a UTF-8 boundary. The cut is a
// copy: a substring would keep the whole value's memory alive (a 2 MiB model
// name, in every snapshot of the rate window).
func cutLabel(v string) string {
	if len(v) <= MaxLabelValueBytes {
		return v
	}
	n := MaxLabelValueBytes
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return strings.Clone(v[:n])
}

// countDropped counts what a scrape's bounds dropped.
func countDropped(c *prometheus.CounterVec, dropped map[string]int) {
	for kind, n := range dropped {
		if n > 0 {
			c.WithLabelValues(kind).Add(float64(n))
		}
	}
}

// boundSnapshot applies the bounds to snap and returns how many values of each
// kind it dropped.
func boundSnapshot(snap *Snapshot) map[string]int {
	if snap == nil {
		return nil
	}
	dropped := map[string]int{}
	names := make([]string, 0, len(snap.Models))
	for name := range snap.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	kept := map[string]*Model{}
	for _, name := range names {
		m := snap.Models[name]
		cut := cutLabel(name)
		if _, dup := kept[cut]; dup || len(kept) >= MaxModels {
			dropped[droppedModel]++
			continue
		}
		m.Name = cut
		kept[cut] = m
		dropped[droppedReason] += boundReasons(m)
	}
	snap.Models = kept
	return dropped
}

// boundReasons cuts m's finished_reason values and sums those past
// MaxFinishedReasons under OtherLabelValue; it returns how many it summed.
func boundReasons(m *Model) int {
	if len(m.RequestSuccess) == 0 {
		return 0
	}
	reasons := make([]string, 0, len(m.RequestSuccess))
	for r := range m.RequestSuccess {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	out := make(map[string]float64, min(len(reasons), MaxFinishedReasons+1))
	n := 0
	for _, r := range reasons {
		v := m.RequestSuccess[r]
		c := cutLabel(r)
		if _, ok := out[c]; !ok && len(out) >= MaxFinishedReasons {
			c = OtherLabelValue
			n++
		}
		out[c] += v
	}
	m.RequestSuccess = out
	return n
}

// bound applies the bounds to the model ids of /v1/models and returns how
// many it dropped.
func (info *ServerInfo) bound() int {
	ids := make([]string, 0, len(info.Base))
	for id := range info.Base {
		ids = append(ids, id)
	}
	for id := range info.MaxModelLen {
		if _, ok := info.Base[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	base, maxLen := map[string]string{}, map[string]int{}
	dropped := 0
	for _, id := range ids {
		c := cutLabel(id)
		_, dup := base[c]
		if _, ok := maxLen[c]; ok {
			dup = true
		}
		if dup || countKeys(base, maxLen) >= MaxServedModels {
			dropped++
			continue
		}
		if b, ok := info.Base[id]; ok {
			base[c] = cutLabel(b)
		}
		if n, ok := info.MaxModelLen[id]; ok {
			maxLen[c] = n
		}
	}
	info.Base, info.MaxModelLen = base, maxLen
	info.Version = cutLabel(info.Version)
	return dropped
}

// countKeys counts the distinct keys of the two maps.
func countKeys(a map[string]string, b map[string]int) int {
	n := len(a)
	for k := range b {
		if _, ok := a[k]; !ok {
			n++
		}
	}
	return n
}
