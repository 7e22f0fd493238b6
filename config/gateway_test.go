package config

import (
	"reflect"
	"testing"
)

// A gateway's members are the targets it lists, or the other targets that
// share its member_label value (discovered ones included: GatewayMembers
// reads the running targets); its member header defaults to the Endpoint
// Picker's; a header value maps to a member by its name or host:port.
func TestGatewayMembers(t *testing.T) {
	cfg, err := Load([]byte(`
modules:
  m: {prober: completions, prompt: hi}
targets:
  - {name: pod-a, url: "http://127.0.0.2:8000", labels: {pool: llama}}
  - {name: pod-b, url: "http://127.0.0.3:8000", labels: {pool: llama}}
  - {name: pod-c, url: "http://127.0.0.4:8000", labels: {pool: qwen}}
  - name: gw
    url: http://127.0.0.1:8080
    labels: {pool: llama}
    gateway: {member_label: pool}
  - name: lb
    url: http://127.0.0.1:8081
    labels: {pool: llama}
    gateway: {members: [pod-c, pod-a], member_header: X-Served-By}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := cfg.Target("gw")
	lb, _ := cfg.Target("lb")
	pod, _ := cfg.Target("pod-a")
	if got, want := cfg.GatewayMembers(gw), []string{"pod-a", "pod-b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("members by label: %v, want %v (not the other gateway, not another pool)", got, want)
	}
	if got, want := cfg.GatewayMembers(lb), []string{"pod-a", "pod-c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("members by name: %v, want %v", got, want)
	}
	if cfg.GatewayMembers(pod) != nil {
		t.Error("an engine target has members")
	}
	if gw.Gateway.MemberHeader != DefaultMemberHeader || lb.Gateway.MemberHeader != "X-Served-By" {
		t.Errorf("member headers %q, %q", gw.Gateway.MemberHeader, lb.Gateway.MemberHeader)
	}
	want := map[string]string{"pod-a": "pod-a", "127.0.0.2:8000": "pod-a", "pod-b": "pod-b", "127.0.0.3:8000": "pod-b"}
	if got := cfg.MemberOf(gw); !reflect.DeepEqual(got, want) {
		t.Errorf("MemberOf %v, want %v", got, want)
	}
}
