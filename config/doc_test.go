package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// CONFIGURATION.md documents every key of the file, in placeholder grammar.
func TestConfigurationDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Config](), reflect.TypeFor[Global](), reflect.TypeFor[Module](),
		reflect.TypeFor[Message](), reflect.TypeFor[Target](), reflect.TypeFor[BaselineRef](),
	} {
		for f := range typ.Fields() {
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			re := regexp.MustCompile(`(?m)^\s*(\[ |- )?` + regexp.QuoteMeta(key) + `:`)
			if !re.Match(doc) {
				t.Errorf("CONFIGURATION.md does not document %s.%s (%q)", typ.Name(), f.Name, key)
			}
		}
	}
}

// The full example of CONFIGURATION.md is a valid configuration.
func TestConfigurationDocExampleLoads(t *testing.T) {
	doc, err := os.ReadFile("../CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(doc), "\n## Example\n")
	if !ok {
		t.Fatal(`CONFIGURATION.md has no "## Example" section`)
	}
	_, block, ok := strings.Cut(example, "```yaml\n")
	if !ok {
		t.Fatal("the Example section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	cfg, err := Load([]byte(block), t.TempDir())
	if err != nil {
		t.Fatalf("the example of CONFIGURATION.md does not load: %v", err)
	}
	if len(cfg.Targets) != 2 || len(cfg.Modules) != 2 {
		t.Errorf("example loaded %d targets and %d modules, want 2 and 2", len(cfg.Targets), len(cfg.Modules))
	}
}
