package mixin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
)

// fakePrometheus serves the two API endpoints the Client uses.
func fakePrometheus(t *testing.T, firingAfter int32) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var alertCalls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/query":
			_ = r.ParseForm() // client_golang's API client POSTs the form
			switch r.Form.Get("query") {
			case "up":
				w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"vllm_prober"},"value":[1,"1"]},{"metric":{"job":"x"},"value":[1,"0"]}]}}`))
			case "empty":
				w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
			default:
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
			}
		case "/api/v1/alerts":
			state := "pending"
			if alertCalls.Add(1) > firingAfter {
				state = "firing"
			}
			w.Write([]byte(`{"status":"success","data":{"alerts":[{"labels":{"alertname":"VLLMEngineHung","target":"sim"},"annotations":{"summary":"s"},"state":"` + state + `","value":"1e+00"}]}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &alertCalls
}

func TestClientQuery(t *testing.T) {
	srv, _ := fakePrometheus(t, 0)
	c := &Client{BaseURL: srv.URL}
	ctx := context.Background()
	if n, err := c.Query(ctx, "up"); err != nil || n != 2 {
		t.Errorf("Query(up) = %d, %v; want 2 series", n, err)
	}
	if n, err := c.Query(ctx, "empty"); err != nil || n != 0 {
		t.Errorf("Query(empty) = %d, %v; want 0", n, err)
	}
	if _, err := c.Query(ctx, "bad("); err == nil || err.Error() != "querying Prometheus: bad_data: parse error" {
		t.Errorf("Query(bad) err = %v", err)
	}
}

func TestClientWaitForAlert(t *testing.T) {
	srv, calls := fakePrometheus(t, 2)
	c := &Client{BaseURL: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := c.WaitForAlert(ctx, "VLLMEngineHung", map[string]string{"target": "sim"}, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != "firing" || calls.Load() != 3 {
		t.Errorf("got %+v after %d polls, want firing on the third", a, calls.Load())
	}
	// A label that never matches: gives up when the context ends.
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := c.WaitForAlert(short, "VLLMEngineHung", map[string]string{"target": "other"}, 5*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
}

func TestDashboardQueriesAreRunnable(t *testing.T) {
	qs, err := DashboardQueries(root("dashboards"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 40 {
		t.Fatalf("got %d queries", len(qs))
	}
	for _, q := range qs {
		if strings.Contains(q.Expr, "$") {
			t.Errorf("%s / %s: variable left in %s", q.Dashboard, q.Panel, q.Expr)
		}
	}
}

func TestPrometheusConfig(t *testing.T) {
	spec, err := LoadSpec(root("mixin/slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := PrometheusConfig(spec, []string{"127.0.0.1:9116"}, 2*time.Second, []string{"/tmp/r/" + RulesFile, "/tmp/r/" + AlertsFile})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global        map[string]string `yaml:"global"`
		RuleFiles     []string          `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if cfg.Global["scrape_interval"] != "2s" || len(cfg.RuleFiles) != 2 || cfg.ScrapeConfigs[0].JobName != "vllm_prober" ||
		cfg.ScrapeConfigs[0].StaticConfigs[0].Targets[0] != "127.0.0.1:9116" {
		t.Errorf("unexpected config:\n%s", b)
	}
}
