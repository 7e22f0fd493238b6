package daemon

import (
	"net/http"
)

// stateChanging guards a handler that changes the daemon's state (POST
// /-/reload; any later admin endpoint wraps itself in it too): it answers
// only POST (405 with Allow: POST otherwise), and refuses a cross-site
// request (403) with net/http's CrossOriginProtection, which reads the
// browser's Sec-Fetch-Site header, or compares the Origin header's host with
// the Host header. A web page on another site can then not make a visitor's
// browser reload the daemon. Requests without either header (curl, a
// Kubernetes sidecar, Prometheus tooling) are not browsers' and pass.
func stateChanging(h http.HandlerFunc) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		textResponse(w, http.StatusForbidden, "cross-site request refused: this endpoint changes the daemon's state")
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			textResponse(w, http.StatusMethodNotAllowed, "This endpoint requires a POST request.")
			return
		}
		h(w, r)
	}))
}
