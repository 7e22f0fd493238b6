package discovery

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
)

// The worked example of docs/discovery.md ("Prices"): a node's GPU product
// mapped to a price, a pod annotation overriding it, target_defaults as the
// fallback.
const priceConfig = `
file_sd_configs: [{files: [unused.json]}]
relabel_configs:
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: __target_name__
  - source_labels: [__meta_kubernetes_node_label_nvidia_com_gpu_product]
    regex: NVIDIA-H100-80GB-HBM3
    target_label: __price_per_hour__
    replacement: "2.50"
  - source_labels: [__meta_kubernetes_node_label_nvidia_com_gpu_product]
    regex: NVIDIA-A100-SXM4-80GB
    target_label: __price_per_hour__
    replacement: "1.29"
  - source_labels: [__meta_kubernetes_pod_annotation_vllm_prober_io_price_per_hour]
    regex: (.+)
    target_label: __price_per_hour__
  - source_labels: [__meta_kubernetes_pod_annotation_vllm_prober_io_no_price]
    regex: "true"
    target_label: __price_per_hour__
    replacement: ""
target_defaults:
  price_per_hour: 3
`

func TestRelabellingPrice(t *testing.T) {
	logs := &logBuffer{}
	cfg := loadConfig(t, priceConfig)
	pod := func(name string, meta model.LabelSet) model.LabelSet {
		l := model.LabelSet{model.AddressLabel: model.LabelValue(name + ":8000"), "__meta_kubernetes_pod_name": model.LabelValue(name)}
		for k, v := range meta {
			l[k] = v
		}
		return l
	}
	const gpu, ann = "__meta_kubernetes_node_label_nvidia_com_gpu_product", "__meta_kubernetes_pod_annotation_vllm_prober_io_price_per_hour"
	invalid := NewInvalidPrices()
	got := TargetsCounting(map[string][]*targetgroup.Group{"file_sd_configs[0]": {{Source: "pods", Targets: []model.LabelSet{
		pod("h100", model.LabelSet{gpu: "NVIDIA-H100-80GB-HBM3"}),
		pod("a100", model.LabelSet{gpu: "NVIDIA-A100-SXM4-80GB"}),
		pod("annotated", model.LabelSet{gpu: "NVIDIA-H100-80GB-HBM3", ann: "4.75"}),
		pod("other-gpu", model.LabelSet{gpu: "NVIDIA-L4"}),
		pod("unpriced", model.LabelSet{"__meta_kubernetes_pod_annotation_vllm_prober_io_no_price": "true"}),
		pod("negative", model.LabelSet{ann: "-1"}),
		pod("currency", model.LabelSet{ann: "$2.50"}),
		pod("nan", model.LabelSet{ann: "NaN"}),
	}}}}, nil, cfg, logs.logger(), Counters{InvalidPrices: invalid})
	want := map[string]float64{"h100": 2.5, "a100": 1.29, "annotated": 4.75, "other-gpu": 3}
	if len(got) != 8 {
		t.Fatalf("targets %v, want all 8: a bad price drops the price, never the target", names(got))
	}
	for _, tg := range got {
		w, priced := want[tg.Name]
		switch {
		case !priced && tg.PricePerHour != nil:
			t.Errorf("%s: price %v, want none", tg.Name, *tg.PricePerHour)
		case priced && (tg.PricePerHour == nil || *tg.PricePerHour != w):
			t.Errorf("%s: price %v, want %v", tg.Name, tg.PricePerHour, w)
		}
	}
	if n := testutil.ToFloat64(invalid); n != 3 {
		t.Errorf("vllm_prober_discovery_invalid_prices_total = %v, want 3", n)
	}
	for _, line := range []string{
		`level=warn msg="Discovered target has an invalid price, exporting no cost series for it" target=negative label=__price_per_hour__ err="price_per_hour -1 must be greater than 0 (leave it unset for a target without a price)"`,
		`target=currency label=__price_per_hour__ err="price_per_hour \"$2.50\" is not a number"`,
		`target=nan label=__price_per_hour__ err="price_per_hour NaN is not a finite number"`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no log line %s; log:\n%s", line, logs)
		}
	}
}
