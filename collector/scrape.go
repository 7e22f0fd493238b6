package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllm-prober/vllm_prober/internal/vllmapi"
)

// AcceptHeader negotiates delimited protobuf, OpenMetrics and the classic text
// format, in Prometheus' order of preference. vLLM's prometheus_client answers
// OpenMetrics or text; Go servers (vllm_sim) answer protobuf.
const AcceptHeader = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,` +
	`application/openmetrics-text;version=1.0.0;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,` +
	`text/plain;version=0.0.4;q=0.2,*/*;q=0.1`

// maxBodyBytes bounds what one scrape reads; a vLLM exposition is well under 1 MiB.
const maxBodyBytes = 32 << 20

var errBodyTooLarge = fmt.Errorf("response body larger than %d bytes", maxBodyBytes)

// Scrape fetches url (the full metrics URL, e.g. http://127.0.0.1:8000/metrics)
// once with client and normalises it. The deadline comes from ctx. Any HTTP
// status other than 200, an undecodable body or a body larger than 32 MiB is
// an error. The snapshot's Time is the midpoint between sending the request
// and receiving the response headers: the server read its values somewhere
// in between, and the midpoint is off by at most half the round trip.
//
// The payload is read by the profile of the engine it comes from, detected
// from the families present (Snapshot.Engine; EngineUnknown when none
// matches).
func Scrape(ctx context.Context, client *http.Client, url string) (*Snapshot, error) {
	return ScrapeEngine(ctx, client, url, "")
}

// ScrapeEngine is Scrape reading the payload by engine's profile whatever
// its families; "" detects the engine.
func ScrapeEngine(ctx context.Context, client *http.Client, url, engine string) (*Snapshot, error) {
	return scrapeEngine(ctx, client, url, engine, nil)
}

// scrapeEngine is ScrapeEngine reading and keeping the labels of the
// series it decodes in cache (nil: none).
func scrapeEngine(ctx context.Context, client *http.Client, url, engine string, cache *labelCache) (*Snapshot, error) {
	fs, seen, at, err := fetchFamilies(ctx, client, url, true, cache)
	if err != nil {
		return nil, err
	}
	if routerPayload(fs) {
		return nil, errRouterPayload
	}
	return normalise(fs, at, engine, seen), nil
}

// fetchFamilies GETs url and decodes its families: with filter, only those
// the engine profiles read (decodeFamilies); the gateway profiles read the
// whole payload. at is when the server read its values (Scrape). Labels
// are read from and kept in cache (nil: none).
func fetchFamilies(ctx context.Context, client *http.Client, url string, filter bool, cache *labelCache) (families, []string, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("creating scrape request: %w", err)
	}
	req.Header.Set("Accept", AcceptHeader)
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.FormatFloat(time.Until(dl).Seconds(), 'f', 3, 64))
	}
	sent := time.Now()
	resp, err := client.Do(req)
	at := sent.Add(time.Since(sent) / 2)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, nil, time.Time{}, fmt.Errorf("scraping metrics: server returned HTTP status %s", resp.Status)
	}
	fs, seen, err := decodeFamiliesSeen(&limitedReader{r: resp.Body, n: maxBodyBytes}, decodeFormat(resp.Header), filter, cache)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("decoding metrics: %w", err)
	}
	return fs, seen, at, nil
}

// decodeFormat picks the decoder format from the response's Content-Type.
// expfmt.ResponseFormat knows protobuf and text 0.0.4; OpenMetrics 1.0 and
// 0.0.1 are read by the text decoder (counters come out as untyped families
// named ..._total, _created samples as separate families, which the
// normaliser never looks at). Names are validated as UTF-8, so vLLM's colon
// names parse under every format.
func decodeFormat(h http.Header) expfmt.Format {
	f := expfmt.ResponseFormat(h)
	if f.FormatType() == expfmt.TypeUnknown {
		f = expfmt.FmtText
		if mt, params, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && mt == expfmt.OpenMetricsType {
			if v := params["version"]; v == expfmt.OpenMetricsVersion_0_0_1 {
				f = expfmt.FmtOpenMetrics_0_0_1
			} else {
				f = expfmt.FmtOpenMetrics_1_0_0
			}
		}
	}
	return f.WithEscapingScheme(model.NoEscaping)
}

type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n <= 0 && err == nil {
		// Probe for more input: exactly maxBodyBytes is fine, more is not.
		var one [1]byte
		if m, _ := l.r.Read(one[:]); m > 0 {
			return n, errBodyTooLarge
		}
	}
	return n, err
}

// ServerInfo is what /version (llama-server: /props) and /v1/models say
// about a server.
type ServerInfo struct {
	Version     string         // /version "version", llama-server's /props "build_info"; "" when unknown
	MaxModelLen map[string]int // /v1/models max_model_len by model id (llama-server: /props n_ctx)
	// Base maps every model id of /v1/models to the model whose name its
	// traffic is counted under in /metrics: a LoRA adapter's parent (vLLM
	// lists adapters with parent = the base model and root = the adapter's
	// path; serving_models.py, show_available_models), else the id itself.
	Base map[string]string
	// Slots is how many requests the server runs at once when it says so
	// (llama-server's /props total_slots, its --parallel); 0 when unknown.
	Slots int
}

// FetchServerInfo reads what a server of engine (a profile's Engine, "" or
// any other for vLLM's API) says of itself: baseURL/version, or
// llama-server's baseURL/props, and baseURL/v1/models. It returns what it
// could read together with an error naming what failed. A path the server
// does not serve (404) is no error: there is nothing to read there, and
// asking again would only repeat the 404.
func FetchServerInfo(ctx context.Context, client *http.Client, baseURL, engine string) (ServerInfo, error) {
	info := ServerInfo{MaxModelLen: map[string]int{}, Base: map[string]string{}}
	var errs []error
	nCtx := 0
	switch engine {
	case llamacppProfile.Engine:
		if p, err := vllmapi.LlamaCppProps(ctx, client, baseURL); err != nil && !notServed(err) {
			errs = append(errs, fmt.Errorf("reading /props: %w", err))
		} else if err == nil {
			info.Version, info.Slots, nCtx = p.BuildInfo, p.TotalSlots, p.DefaultGenerationSettings.NCtx
		}
	default:
		if v, err := vllmapi.Version(ctx, client, baseURL); err != nil && !notServed(err) {
			errs = append(errs, fmt.Errorf("reading /version: %w", err))
		} else {
			info.Version = v
		}
	}
	if models, err := vllmapi.Models(ctx, client, baseURL, nil); err != nil {
		errs = append(errs, fmt.Errorf("reading /v1/models: %w", err))
	} else {
		ids := map[string]bool{}
		for _, d := range models {
			ids[d.ID] = true
		}
		for _, d := range models {
			if d.ID == "" {
				continue
			}
			switch {
			case d.MaxModelLen > 0:
				info.MaxModelLen[d.ID] = d.MaxModelLen
			case nCtx > 0:
				info.MaxModelLen[d.ID] = nCtx // llama-server serves one model
			}
			base := d.ID
			switch {
			case d.Parent != "":
				base = d.Parent
			case d.Root != "" && d.Root != d.ID && ids[d.Root]:
				base = d.Root // an adapter whose root names a listed model
			}
			info.Base[d.ID] = base
		}
	}
	return info, errors.Join(errs...)
}

// notServed tells a 404 answer: the server has no such path.
func notServed(err error) bool {
	var se *vllmapi.StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// joinURL appends path to the target root URL.
func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + path
}
