// Package reliability holds vllm_prober's cross-package reliability tests:
// the fault matrix, which runs every simulator fault and the network
// faults (connection refused, a name that does not resolve, a TLS handshake
// failure, 401, 429, slow headers) against one daemon with several targets, and
// the secrets test across those faults. It has no non-test code besides this
// comment; run it with
//
//	go test -race -count=1 ./reliability/...
//
// fuzz.sh in this directory runs every Go fuzz target of the module briefly.
package reliability
