package perfutil

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Accept headers as Prometheus sends them: 2.x's default, OpenMetrics first;
// 3.x's with native histograms on (protobuf first); plain text.
const (
	AcceptOpenMetrics = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
	AcceptProtobuf    = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
	AcceptText        = "text/plain;version=0.0.4"
)

// Body is the size of one /metrics answer, compressed (as sent with
// Accept-Encoding: gzip) and not.
type Body struct {
	Format      string // the Content-Type answered
	Gzip, Plain int
}

// ScrapeAs fetches url with the Accept header and gzip, and returns the
// sizes of the body and the body itself, uncompressed.
func ScrapeAs(url, accept string) (Body, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return Body{}, nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", "gzip")
	// A Transport of its own: the default one would decompress silently
	// only when it set Accept-Encoding itself, and we want the wire size.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return Body{}, nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	wire, err := io.ReadAll(resp.Body)
	if err != nil {
		return Body{}, nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	b := Body{Format: resp.Header.Get("Content-Type"), Gzip: len(wire)}
	plain := wire
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(wire))
		if err != nil {
			return Body{}, nil, fmt.Errorf("scraping %s: %w", url, err)
		}
		if plain, err = io.ReadAll(zr); err != nil {
			return Body{}, nil, fmt.Errorf("scraping %s: decompressing: %w", url, err)
		}
	}
	b.Plain = len(plain)
	return b, plain, nil
}

// PairSeries counts the series of one (target, module) pair in a text
// exposition (format 0.0.4): the samples labelled with both, and apart from
// them those labelled with the target and no module (the per-target series:
// health checks and the scraped server's), by family name.
func PairSeries(text []byte, target, module string) (pair, perTarget map[string]int, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the exposition: %w", err)
	}
	pair, perTarget = map[string]int{}, map[string]int{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var t, mod bool
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "target" && l.GetValue() == target:
					t = true
				case l.GetName() == "module" && l.GetValue() == module:
					mod = true
				case l.GetName() == "module":
					t = false // another pair of the target
				}
			}
			if !t {
				continue
			}
			n := seriesOf(f.GetType(), m)
			if mod {
				pair[name] += n
			} else {
				perTarget[name] += n
			}
		}
	}
	return pair, perTarget, nil
}

// seriesOf is the number of series one metric of a text exposition stands for.
func seriesOf(t dto.MetricType, m *dto.Metric) int {
	switch t {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		n := 3 // +Inf, _sum, _count
		for _, b := range m.GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				n++
			}
		}
		return n
	case dto.MetricType_SUMMARY:
		return len(m.GetSummary().GetQuantile()) + 2
	}
	return 1
}

// Sum adds the counts of a map from PairSeries.
func Sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Bodies scrapes url once per Accept header of Prometheus and returns the
// sizes by format name ("text", "openmetrics", "protobuf") and the text body.
func Bodies(url string) (map[string]Body, []byte, error) {
	out := map[string]Body{}
	var text []byte
	for _, f := range []struct{ name, accept string }{{"text", AcceptText}, {"openmetrics", AcceptOpenMetrics}, {"protobuf", AcceptProtobuf}} {
		b, plain, err := ScrapeAs(url, f.accept)
		if err != nil {
			return nil, nil, err
		}
		if f.name == "text" {
			text = plain
		}
		if f.name == "protobuf" && !strings.Contains(b.Format, "protobuf") {
			return nil, nil, errors.New("the daemon did not answer protobuf to " + AcceptProtobuf)
		}
		out[f.name] = b
	}
	return out, text, nil
}
