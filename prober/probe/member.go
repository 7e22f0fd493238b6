package probe

import "strings"

// Member headers: where a gateway says which backend answered a request.
const (
	// HeaderEPPDestination is the endpoint the inference-extension Endpoint
	// Picker chose (x-gateway-destination-endpoint), as a data plane that
	// passes it back on the response carries it.
	HeaderEPPDestination = "X-Gateway-Destination-Endpoint"
)

// Member is the backend a response through a gateway came from, read from the
// response header named header (the EPP's destination, or a load balancer's
// server header such as HAProxy's `http-response set-header x-served-by %s`):
// "" when the header is absent, which for a gateway that sets it on every
// proxied response means the gateway answered itself (a queue timeout, a
// shed request), not a backend. The value is untrusted: it is cut to a short
// run of host, port and name characters; a value of which none is left
// ("***") is MemberUnreadable, a backend the prober cannot name.
func Member(res *Result, header string) string {
	v := strings.TrimSpace(res.ResponseHeader.Get(header))
	var b strings.Builder
	for _, r := range v {
		if b.Len() >= 128 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:[]", r) {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 && v != "" {
		return MemberUnreadable
	}
	return b.String()
}

// MemberUnreadable is Member's value for a member header that holds none of
// the characters kept: a backend answered, but not one the prober can name.
// It can never be a target name, which starts with a letter or digit.
const MemberUnreadable = "_unreadable"
