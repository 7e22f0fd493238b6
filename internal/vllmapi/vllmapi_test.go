package vllmapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClient(t *testing.T) {
	var gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get("X-Extra")
		switch r.URL.Path {
		case "/health":
		case "/version":
			_, _ = w.Write([]byte(`{"version":"0.11.0"}`))
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"base","max_model_len":4096},{"id":"lora","root":"base","parent":"base"}]}`))
		case "/bad/v1/models":
			_, _ = w.Write([]byte(`<html>`))
		default:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"no"}}`))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := srv.Client()
	if err := Health(ctx, c, srv.URL, "/health"); err != nil {
		t.Errorf("Health: %v", err)
	}
	if v, err := Version(ctx, c, srv.URL+"/"); err != nil || v != "0.11.0" {
		t.Errorf("Version = %q, %v", v, err)
	}
	models, err := Models(ctx, c, srv.URL, http.Header{"X-Extra": {"1"}})
	if err != nil || len(models) != 2 || models[0].MaxModelLen != 4096 || models[1].Parent != "base" || gotHeader != "1" {
		t.Errorf("Models = %+v, %v (header %q)", models, err, gotHeader)
	}
	var status *StatusError
	if _, err := Models(ctx, c, srv.URL+"/denied", nil); !errors.As(err, &status) || status.Code != 401 || !strings.Contains(string(status.Body), "no") {
		t.Errorf("401: %v", err)
	}
	var decode *DecodeError
	if _, err := Models(ctx, c, srv.URL+"/bad", nil); !errors.As(err, &decode) {
		t.Errorf("bad JSON: %v", err)
	}
	if _, err := Models(ctx, c, "http://user:pw-in-url@127.0.0.1:1", nil); err == nil || strings.Contains(err.Error(), "pw-in-url") {
		t.Errorf("unreachable: %v (must not carry the URL's password)", err)
	}
}
