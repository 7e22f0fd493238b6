package web

import "net/http"

// adminPOST guards an endpoint that changes what the daemon does (POST
// /-/reload, POST /burst): POST only (405 with Allow: POST otherwise), and
// no cross-site request (sameSiteOnly). A page on another site cannot make a
// visitor's browser reload the daemon or start bursts; curl, a
// configuration-reloader sidecar, Flagger and Argo Rollouts send no browser
// header and pass.
func adminPOST(h http.HandlerFunc) http.Handler {
	return sameSiteOnly("this endpoint changes what the daemon does", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			textResponse(w, http.StatusMethodNotAllowed, "This endpoint requires a POST request.")
			return
		}
		h(w, r)
	}))
}

// sameSiteOnly refuses a cross-site browser request to h with 403 (why: what
// the endpoint does), by net/http's CrossOriginProtection: the browser's
// Sec-Fetch-Site header (cross-site or same-site), or else an Origin header
// whose host is not the request's Host. Non-browser clients (Prometheus'
// scraper, curl) send neither and pass, and so do same-origin pages.
// CrossOriginProtection lets GET, HEAD and OPTIONS through unchecked, as
// HTTP calls them safe; /probe is a GET that sends requests to targets (an
// <img> on any page could start it), so every method is checked here as
// a POST is.
func sameSiteOnly(why string, h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asPOST := *r
		asPOST.Method = http.MethodPost
		if err := cop.Check(&asPOST); err != nil {
			textResponse(w, http.StatusForbidden, "cross-site request refused: %s", why)
			return
		}
		h.ServeHTTP(w, r)
	})
}
