package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStateChangingGuard: a state-changing endpoint answers POST only and
// refuses cross-site requests, by Sec-Fetch-Site or by an Origin of another
// host; same-origin browsers and non-browser clients pass.
func TestStateChangingGuard(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(adminPOST(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		textResponse(w, http.StatusOK, "done")
	}))
	defer srv.Close()
	for _, c := range []struct {
		name, method string
		header       map[string]string
		want         int
	}{
		{"GET", http.MethodGet, nil, http.StatusMethodNotAllowed},
		{"PUT", http.MethodPut, nil, http.StatusMethodNotAllowed},
		{"DELETE", http.MethodDelete, nil, http.StatusMethodNotAllowed},
		{"POST cross-site by Sec-Fetch-Site", http.MethodPost, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"POST same-site other origin", http.MethodPost, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"POST cross-site by Origin", http.MethodPost, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"POST same-origin browser", http.MethodPost, map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"POST same-origin by Origin", http.MethodPost, map[string]string{"Origin": srv.URL}, http.StatusOK},
		{"POST without browser headers (curl)", http.MethodPost, nil, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := calls
			req, err := http.NewRequest(c.method, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s = %d, want %d", c.name, resp.StatusCode, c.want)
			}
			if ran := calls > before; ran != (c.want == http.StatusOK) {
				t.Errorf("the handler ran: %v", ran)
			}
			if c.want == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", resp.Header.Get("Allow"))
			}
		})
	}
}
