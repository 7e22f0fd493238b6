package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/vllm-prober/vllm_prober/discovery/sdconfig"
	"github.com/vllm-prober/vllm_prober/internal/decodeerr"
	"github.com/vllm-prober/vllm_prober/internal/httpclient"
)

// contentTypeRE is the only response type the http_sd spec allows.
var contentTypeRE = regexp.MustCompile(`^(?i:application/json(;\s*charset=("utf-8"|utf-8))?)$`)

// maxHTTPSDBody bounds the response read from an http_sd endpoint.
const maxHTTPSDBody = 64 << 20

// httpProvider polls an http_sd endpoint following the Prometheus HTTP SD
// specification: GET, 200 only, Content-Type application/json, a JSON list of
// target groups. A failed refresh keeps the last good groups.
type httpProvider struct {
	cfg     sdconfig.HTTPSDConfig
	clients *httpclient.Pool
	client  *http.Client
	release sync.Once // of client, by run's end or the Manager's Close
	logger  log.Logger
	// logURL is the URL without query, safe to log.
	logURL string
}

func newHTTPProvider(cfg sdconfig.HTTPSDConfig, clients *httpclient.Pool, logger log.Logger) (*httpProvider, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, errors.New("url is not valid") // validated at load time
	}
	client, err := clients.Acquire(cfg.HTTPClientConfig)
	if err != nil {
		return nil, err // "building HTTP client: ..."
	}
	safe := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return &httpProvider{cfg: cfg, clients: clients, client: client, logger: log.With(logger, "url", safe.String()), logURL: safe.String()}, nil
}

// close gives the client back to the pool, once.
func (p *httpProvider) close() { p.release.Do(func() { p.clients.Release(p.client) }) }

func (p *httpProvider) run(ctx context.Context, send func([]*targetgroup.Group)) {
	defer p.close()
	interval := time.Duration(p.cfg.RefreshInterval)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()

	var last []*targetgroup.Group
	reported := false
	for {
		groups, err := p.fetch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			level.Error(p.logger).Log("msg", "HTTP service discovery failed, keeping the last good targets", "err", err)
			if !reported {
				reported = true
				send(nil) // let startup proceed without these targets
			}
		case !reported || !reflect.DeepEqual(groups, last):
			reported, last = true, groups
			send(groups)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// fetch does one request, bounded by the refresh interval.
func (p *httpProvider) fetch(ctx context.Context) ([]*targetgroup.Group, error) {
	interval := time.Duration(p.cfg.RefreshInterval)
	ctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return nil, errors.New("building request failed")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Prometheus-Refresh-Interval-Seconds", strconv.FormatFloat(interval.Seconds(), 'f', -1, 64))
	resp, err := p.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // drop the URL text, its query may hold a token
		}
		return nil, fmt.Errorf("request failed: %w", err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("server returned HTTP status %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !contentTypeRE.MatchString(strings.TrimSpace(ct)) {
		return nil, fmt.Errorf("unsupported content type %q", ct)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPSDBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if len(body) > maxHTTPSDBody {
		return nil, fmt.Errorf("body is larger than %d bytes", maxHTTPSDBody)
	}
	var groups []*targetgroup.Group
	if err := json.Unmarshal(body, &groups); err != nil {
		return nil, fmt.Errorf("parsing JSON: %w", decodeerr.JSON(err))
	}
	for i, g := range groups {
		if err := checkGroup(g); err != nil {
			return nil, fmt.Errorf("target group %d: %w", i, err)
		}
		g.Source = fmt.Sprintf("%s:%d", p.logURL, i)
		if g.Labels == nil {
			g.Labels = model.LabelSet{}
		}
		g.Labels[URLLabel] = model.LabelValue(p.cfg.URL)
	}
	return groups, nil
}
