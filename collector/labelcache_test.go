package collector

import (
	"bytes"
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// familiesText is fs in the text format, family by family in name order: a
// decode's whole result, comparable across decodes.
func familiesText(t testing.TB, fs families) string {
	t.Helper()
	var b bytes.Buffer
	for _, k := range keys(fs) {
		fmt.Fprintf(&b, "family %q type %s\n", k, fs[k].GetType())
		for _, m := range fs[k].GetMetric() {
			fmt.Fprintf(&b, "  %s\n", protoText(m))
		}
	}
	return b.String()
}

func protoText(m *dto.Metric) string {
	b, err := proto.Marshal(m)
	if err != nil {
		return "unmarshalable: " + err.Error()
	}
	return fmt.Sprintf("%x", b)
}

// decodeCached decodes body as decodeFamilies does, its labels read from
// and kept in cache.
func decodeCached(t testing.TB, body []byte, format expfmt.Format, filter bool, cache *labelCache) (families, error) {
	t.Helper()
	fs, _, err := decodeFamiliesSeen(bytes.NewReader(body), format, filter, cache)
	return fs, err
}

// A scrape whose labels come from the cache decodes exactly what a scrape
// without it decodes: every fixture in every format, filtered or whole, the
// first time (the cache filling) and the second (read from it), through one
// cache shared by all of them as a Manager's scrapers share theirs.
func TestLabelCacheSameFamilies(t *testing.T) {
	cache := newLabelCache()
	for round := range 2 {
		for _, e := range expositions(t) {
			for _, filter := range []bool{false, true} {
				want, werr := decodeFamilies(bytes.NewReader(e.body), e.format, filter)
				got, gerr := decodeCached(t, e.body, e.format, filter, cache)
				if (werr == nil) != (gerr == nil) {
					t.Fatalf("%s filter=%v round %d: error %v with the cache, %v without", e.name, filter, round, gerr, werr)
				}
				if w, g := familiesText(t, want), familiesText(t, got); w != g {
					t.Fatalf("%s filter=%v round %d: the cache changed the families:\n%s\nwithout it:\n%s", e.name, filter, round, g, w)
				}
			}
		}
	}
	if cache.len() == 0 {
		t.Fatal("the cache holds nothing after decoding every fixture twice")
	}
}

// The same series bytes mean other labels in another family type: a
// bucket's le is its bound, an untyped sample's le is one of its labels, a
// summary's quantile is its quantile. The cache keys them apart.
func TestLabelCacheKeyedByType(t *testing.T) {
	histogram := "# TYPE x histogram\nx_bucket{le=\"1\"} 1\nx_bucket{le=\"+Inf\"} 2\nx_sum 3\nx_count 2\n"
	untyped := "x_bucket{le=\"1\"} 1\nx_bucket{le=\"+Inf\"} 2\n"
	summary := "# TYPE x summary\nx{quantile=\"0.5\"} 1\nx_sum 3\nx_count 2\n"
	gauge := "# TYPE x gauge\nx{quantile=\"0.5\"} 1\n"
	cache := newLabelCache()
	for _, body := range []string{histogram, untyped, summary, gauge, histogram, untyped, summary, gauge} {
		for _, format := range []expfmt.Format{expfmt.FmtText, expfmt.FmtOpenMetrics_1_0_0} {
			b := []byte(body)
			if format == expfmt.FmtOpenMetrics_1_0_0 {
				b = append(b, "# EOF\n"...)
			}
			want, werr := decodeFamilies(bytes.NewReader(b), format, false)
			got, gerr := decodeCached(t, b, format, false, cache)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%q: error %v with the cache, %v without", b, gerr, werr)
			}
			if w, g := familiesText(t, want), familiesText(t, got); w != g {
				t.Fatalf("%q: the cache changed the families:\n%s\nwithout it:\n%s", b, g, w)
			}
		}
	}
}

// A target that sends new series at every scrape cannot grow the cache past
// two generations, and cannot push out the series every other target sends
// at every scrape.
func TestLabelCacheBounded(t *testing.T) {
	cache := newLabelCache()
	fleet := []byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\n")
	kind := cacheKind(false, "")
	series := []byte(`vllm:num_requests_running{engine="0",model_name="m"}`)
	if _, err := decodeCached(t, fleet, expfmt.FmtText, true, cache); err != nil {
		t.Fatal(err)
	}
	for scrape := range 5 * maxCachedSeries / 1000 {
		var hostile bytes.Buffer
		hostile.WriteString("# TYPE vllm:num_requests_running gauge\n")
		for i := range 1000 {
			fmt.Fprintf(&hostile, "vllm:num_requests_running{engine=\"0\",model_name=\"m%d-%d\"} 1\n", scrape, i)
		}
		if _, err := decodeCached(t, hostile.Bytes(), expfmt.FmtText, true, cache); err != nil {
			t.Fatal(err)
		}
		if n := cache.len(); n > 2*maxCachedSeries {
			t.Fatalf("after %d hostile scrapes the cache holds %d series, more than 2×%d", scrape+1, n, maxCachedSeries)
		}
		if _, ok := cache.get(kind, series); !ok {
			t.Fatalf("after %d hostile scrapes the fleet's series, read at every scrape, is no longer cached", scrape+1)
		}
		if _, err := decodeCached(t, fleet, expfmt.FmtText, true, cache); err != nil {
			t.Fatal(err)
		}
	}
}
