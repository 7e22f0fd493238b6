package redact

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	commoncfg "github.com/prometheus/common/config"
)

// uEscaped spells s as JSON string content with the characters at which pick
// is true as \uXXXX (a surrogate pair beyond the BMP; upper-case hex when
// upper), the rest as encoding/json writes them.
func uEscaped(s string, upper bool, pick func(i int) bool) string {
	var b strings.Builder
	format := "\\u%04x"
	if upper {
		format = "\\u%04X"
	}
	for i, r := range []rune(s) {
		if !pick(i) {
			b.WriteString(jsonEscaped(string(r), false))
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != '\uFFFD' {
			fmt.Fprintf(&b, format+format, r1, r2)
		} else {
			fmt.Fprintf(&b, format, r)
		}
	}
	return b.String()
}

// TestEscapedSecrets: every credential kind, spelled with \u escapes in every
// way a JSON encoder or a hostile target may (every character, every other
// one, upper-case hex, surrogate pairs for characters beyond the BMP, inside
// a JSON string quoted once more), inside a JSON error body, is scrubbed: no
// output built from String, Cut, ScrubTail, Label or Error reads as the
// secret once its escapes are decoded.
func TestEscapedSecrets(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Each secret holds characters JSON escapes, HTML escaping changes, and
	// one beyond the BMP (a surrogate pair when \u-escaped).
	for _, c := range []struct {
		name, secret string
		cfg          commoncfg.HTTPClientConfig
	}{
		{"bearer_token", "S3cr\"t<&>é😀-bt", commoncfg.HTTPClientConfig{BearerToken: "S3cr\"t<&>é😀-bt"}},
		{"bearer_token_file", "S3cr\\t😀-btf", commoncfg.HTTPClientConfig{BearerTokenFile: file("bt", "S3cr\\t😀-btf\n")}},
		{"authorization credentials", "S3cr/t😀-ac", commoncfg.HTTPClientConfig{Authorization: &commoncfg.Authorization{Type: "Token", Credentials: "S3cr/t😀-ac"}}},
		{"authorization credentials_file", "S3cr<t😀-acf", commoncfg.HTTPClientConfig{Authorization: &commoncfg.Authorization{CredentialsFile: file("ac", "S3cr<t😀-acf\n")}}},
		{"basic_auth password", "S3cr&t😀-ba", commoncfg.HTTPClientConfig{BasicAuth: &commoncfg.BasicAuth{Username: "alice", Password: "S3cr&t😀-ba"}}},
		{"basic_auth password_file", "S3cr>t😀-baf", commoncfg.HTTPClientConfig{BasicAuth: &commoncfg.BasicAuth{Username: "bob", PasswordFile: file("pw", "S3cr>t😀-baf\n")}}},
		{"oauth2 client_secret", "S3cr+t😀-oa", commoncfg.HTTPClientConfig{OAuth2: &commoncfg.OAuth2{ClientID: "cid", ClientSecret: "S3cr+t😀-oa", TokenURL: "http://127.0.0.1:1/token"}}},
		{"http_headers secrets", "S3cr t😀-hs", commoncfg.HTTPClientConfig{HTTPHeaders: &commoncfg.Headers{Headers: map[string]commoncfg.Header{"X-Api-Key": {Secrets: []commoncfg.Secret{"S3cr t😀-hs"}}}}}},
		{"http_headers files", "S3cr=t😀-hf", commoncfg.HTTPClientConfig{HTTPHeaders: &commoncfg.Headers{Headers: map[string]commoncfg.Header{"X-Other": {Files: []string{file("h", "S3cr=t😀-hf\n")}}}}}},
	} {
		r := New(ClientSecrets(&c.cfg)...)
		// A learned OAuth2 access token is a credential as well.
		tok := "Tk9-" + c.secret
		r.Learn("Bearer " + tok)
		for _, secret := range []string{c.secret, tok, url.QueryEscape(c.secret)} {
			spellings := map[string]string{
				"every character":      uEscaped(secret, false, func(int) bool { return true }),
				"every character, hex": uEscaped(secret, true, func(int) bool { return true }),
				"mixed":                uEscaped(secret, false, func(i int) bool { return i%2 == 0 }),
				"mixed, odd":           uEscaped(secret, true, func(i int) bool { return i%2 == 1 }),
				"non-ASCII only":       uEscaped(secret, false, func(i int) bool { return []rune(secret)[i] > 127 }),
				"slash escaped":        strings.ReplaceAll(jsonEscaped(secret, false), "/", `\/`),
			}
			for form, sp := range spellings {
				// A JSON string quoted in JSON (an error quoting an upstream
				// body) carries the same spelling once more escaped.
				twice := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(sp)
				for where, text := range map[string]string{
					"body":         `{"error":{"message":"denied: ` + sp + `","code":401}}`,
					"quoted body":  `upstream said "{\"error\":{\"message\":\"` + twice + `\"}}"`,
					"header value": "X-Echo: " + sp,
				} {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", c.name, secret, form, where), func(t *testing.T) {
						label, held := r.Label(text)
						outputs := map[string]string{
							"String":    r.String(text),
							"Cut":       r.Cut(text, 4096),
							"ScrubTail": r.ScrubTail(text),
							"Label":     label,
							"Error":     r.Error(fmt.Errorf("probe: %s", text)),
						}
						if !held {
							t.Errorf("Label(%q) holds no secret", text)
						}
						for name, out := range outputs {
							if decoded := decodeJSONText(out); strings.Contains(decoded, secret) {
								t.Errorf("%s(%q) = %q, which reads %q", name, text, out, decoded)
							}
						}
					})
				}
			}
		}
	}
}

// decodeJSONText is what a reader sees of text: each run inside double quotes
// that is a JSON string decoded (twice, for a JSON string quoted in JSON),
// and the whole text decoded as string content too.
func decodeJSONText(text string) string {
	out := []string{text}
	for range 2 {
		var s string
		if json.Unmarshal([]byte(`"`+text+`"`), &s) != nil {
			// Not one JSON string content: decode the \u escapes alone.
			s = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(foldForTest(text))
		}
		text = s
		out = append(out, text)
	}
	return strings.Join(out, "\n")
}

// foldForTest decodes \uXXXX escapes (and surrogate pairs) wherever they
// are, by the standard library's JSON decoder, one at a time.
func foldForTest(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], `\u`) && i+6 <= len(s) {
			n := 6
			if i+12 <= len(s) && strings.HasPrefix(s[i+6:], `\u`) {
				n = 12
			}
			var r string
			if json.Unmarshal([]byte(`"`+s[i:i+n]+`"`), &r) == nil && !strings.ContainsRune(r, '\uFFFD') {
				b.WriteString(r)
				i += n
				continue
			}
			if json.Unmarshal([]byte(`"`+s[i:i+6]+`"`), &r) == nil {
				b.WriteString(r)
				i += 6
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// TestScrubTailCutInEscape: a text cut inside a \u escape that follows the
// start of a secret (a stream broken mid-echo) loses that start too.
func TestScrubTailCutInEscape(t *testing.T) {
	r := New(`Zq07Wm7x"\<&>/+=? %`)
	for _, text := range []string{
		`a | b=<secret> | c=Zq07Wm7x\"\\<&>/+=\u`,
		`a | b=<secret> | c=Zq07Wm7x\"\\<&>/+=\u00`,
		`c=Zq07Wm7x\"\\<&>/+=\`,
	} {
		if got := r.ScrubTail(text); strings.Contains(got, "Zq07") {
			t.Errorf("ScrubTail(%q) = %q", text, got)
		}
	}
}
