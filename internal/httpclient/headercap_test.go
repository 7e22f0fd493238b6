package httpclient

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commoncfg "github.com/prometheus/common/config"
)

// TestResponseHeadersCapped: a target sending a 4 MiB header (net/http alone
// takes up to 10 MiB) fails with ErrResponseHeaderTooLarge, naming the size,
// whatever the client's configuration; headers under the cap pass.
func TestResponseHeadersCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("X-Served-By", strings.Repeat("a", 4<<20))
		} else {
			w.Header().Set("X-Served-By", strings.Repeat("a", MaxResponseHeaderBytes/2))
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	for name, cfg := range map[string]commoncfg.HTTPClientConfig{
		"plain":  commoncfg.DefaultHTTPClientConfig,
		"bearer": bearer("tok-1234"),
	} {
		t.Run(name, func(t *testing.T) {
			p := New(nil)
			c, err := p.Acquire(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release(c)
			resp, err := c.Get(srv.URL + "/small")
			if err != nil {
				t.Fatalf("headers under the cap: %v", err)
			}
			_ = resp.Body.Close()
			resp, err = c.Get(srv.URL + "/big")
			if err == nil {
				_ = resp.Body.Close()
				t.Fatalf("a 4 MiB response header was accepted (%d bytes of headers)", len(resp.Header.Get("X-Served-By")))
			}
			if !errors.Is(err, ErrResponseHeaderTooLarge) {
				t.Errorf("error %v, want ErrResponseHeaderTooLarge", err)
			}
		})
	}
}
