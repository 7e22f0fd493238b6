package config

import (
	"net/url"
	"testing"
)

// TestURLProbesAllowedHop: a redirect hop is allowed when the hop without its
// query, or one of its parent paths, is matched by the anchored allow-list,
// as a target URL is; anything else, and any hop with credentials, is not.
func TestURLProbesAllowedHop(t *testing.T) {
	u := &URLProbes{AllowedURLs: []string{`http://vllm-[a-z]+\.ml:8000`, `https://gw\.example/llama/`}, TokenBudgetPerHour: 1000}
	c := &Config{}
	if err := u.validate(c, ""); err != nil {
		t.Fatal(err)
	}
	for hop, want := range map[string]bool{
		"http://vllm-a.ml:8000/v1/models":              true,
		"http://vllm-a.ml:8000/v1/completions?x=1":     true,
		"http://vllm-a.ml:8000":                        true,
		"https://gw.example/llama/v1/completions":      true,
		"https://gw.example/llama":                     false, // the regex wants the trailing slash
		"https://gw.example/other/v1/completions":      false,
		"http://vllm-a.ml:8001/v1/models":              false,
		"http://vllm-a.ml.evil.example:8000/v1/models": false,
		"http://evil.example/http://vllm-a.ml:8000":    false,
		"http://169.254.169.254/latest/meta-data/iam":  false,
		"http://user:pw@vllm-a.ml:8000/v1/models":      false,
		"https://vllm-a.ml:8000/v1/models":             false,
	} {
		h, err := url.Parse(hop)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.AllowedHop(h); got != want {
			t.Errorf("AllowedHop(%s) = %v, want %v", hop, got, want)
		}
	}
}
