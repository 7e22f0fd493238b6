package deploy

import (
	"reflect"
	"testing"
)

// TestChartWebConfig: with webConfigFile enabling TLS and basic auth, the
// kubelet's probes and the ServiceMonitor still reach the daemon: https,
// the ServiceMonitor's tlsConfig and basicAuth, and probes that send the
// given headers or, without them, check the port only (an unauthenticated
// GET would get 401). By default nothing of it is rendered.
func TestChartWebConfig(t *testing.T) {
	tlsConfig := map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "web-tls", "key": "ca.crt"}}, "serverName": "vllm-prober"}
	basicAuth := map[string]any{
		"username": map[string]any{"name": "web-auth", "key": "username"},
		"password": map[string]any{"name": "web-auth", "key": "password"},
	}
	headers := []any{map[string]any{"name": "Authorization", "value": "Basic cHJvbTpzZWNyZXQ="}}
	for _, r := range renderers(t) {
		t.Run(r.name, func(t *testing.T) {
			for _, c := range []struct {
				name      string
				web       map[string]any
				scheme    any // of the probes' httpGet; nil: HTTP (unset)
				tcp       bool
				headers   any
				smScheme  any
				smTLS     any
				smBasic   any
				webConfig bool
			}{
				{name: "default"},
				{name: "TLS", webConfig: true, web: map[string]any{"tls": true, "tlsConfig": tlsConfig},
					scheme: "HTTPS", smScheme: "https", smTLS: normalize(tlsConfig)},
				{name: "TLS and basic auth", webConfig: true, web: map[string]any{"tls": true, "tlsConfig": tlsConfig, "basicAuth": basicAuth},
					tcp: true, smScheme: "https", smTLS: normalize(tlsConfig), smBasic: normalize(basicAuth)},
				{name: "basic auth with probe headers", webConfig: true, web: map[string]any{"basicAuth": basicAuth, "probeHttpHeaders": headers},
					headers: normalize(headers), smBasic: normalize(basicAuth)},
			} {
				t.Run(c.name, func(t *testing.T) {
					overrides := map[string]any{}
					if c.webConfig {
						overrides["webConfigFile"] = "/etc/vllm_prober/web/web.yml"
						overrides["web"] = c.web
					}
					objs, err := r.render(t, overrides)
					if err != nil {
						t.Fatal(err)
					}
					ctr := container(t, one(t, objs, "StatefulSet"))
					for _, p := range []string{"livenessProbe", "readinessProbe"} {
						probe, _ := ctr[p].(map[string]any)
						if c.tcp {
							if dig(probe, "tcpSocket", "port") != "http" || probe["httpGet"] != nil {
								t.Errorf("%s = %v, want tcpSocket on http", p, probe)
							}
							continue
						}
						if got := dig(probe, "httpGet", "scheme"); got != c.scheme {
							t.Errorf("%s scheme = %v, want %v", p, got, c.scheme)
						}
						if got := dig(probe, "httpGet", "httpHeaders"); !reflect.DeepEqual(got, c.headers) {
							t.Errorf("%s httpHeaders = %v, want %v", p, got, c.headers)
						}
					}
					ep := dig(one(t, objs, "ServiceMonitor"), "spec", "endpoints")
					eps, _ := ep.([]any)
					if len(eps) != 1 {
						t.Fatalf("ServiceMonitor endpoints = %v", ep)
					}
					e := eps[0].(map[string]any)
					for key, want := range map[string]any{"scheme": c.smScheme, "tlsConfig": c.smTLS, "basicAuth": c.smBasic} {
						if got := e[key]; !reflect.DeepEqual(got, want) {
							t.Errorf("ServiceMonitor %s = %v, want %v", key, got, want)
						}
					}
				})
			}
		})
	}
}
