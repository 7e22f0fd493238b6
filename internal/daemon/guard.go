package daemon

import "net/http"

// adminPOST guards an endpoint that changes what the daemon does (POST
// /-/reload, POST /burst): POST only (405 with Allow: POST otherwise), and
// no cross-site request (403), by net/http's CrossOriginProtection (the
// browser's Sec-Fetch-Site header, or the Origin header's host against
// Host). A page on another site cannot make a visitor's browser reload the
// daemon or start bursts; curl, a configuration-reloader sidecar, Flagger
// and Argo Rollouts send neither header and pass.
func adminPOST(h http.HandlerFunc) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		textResponse(w, http.StatusForbidden, "cross-site request refused: this endpoint changes what the daemon does")
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
