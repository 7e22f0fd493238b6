package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/discovery/dns"
	"github.com/prometheus/prometheus/discovery/file"
	"github.com/prometheus/prometheus/discovery/http"
	"github.com/prometheus/prometheus/discovery/kubernetes"
)

// CONFIGURATION.md documents every key of the file, in placeholder grammar.
func TestConfigurationDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Config](), reflect.TypeFor[Global](), reflect.TypeFor[Module](),
		reflect.TypeFor[Message](), reflect.TypeFor[Target](), reflect.TypeFor[BaselineRef](), reflect.TypeFor[Gateway](),
		reflect.TypeFor[Discovery](), reflect.TypeFor[SDConfigs](), reflect.TypeFor[URLProbes](),
		reflect.TypeFor[file.SDConfig](), reflect.TypeFor[http.SDConfig](), reflect.TypeFor[kubernetes.SDConfig](), reflect.TypeFor[dns.SDConfig](),
		reflect.TypeFor[kubernetes.NamespaceDiscovery](), reflect.TypeFor[kubernetes.SelectorConfig](), reflect.TypeFor[kubernetes.AttachMetadataConfig](),
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
	if len(cfg.Targets) != 3 || len(cfg.Modules) != 2 {
		t.Errorf("example loaded %d targets and %d modules, want 3 and 2", len(cfg.Targets), len(cfg.Modules))
	}
}

// The discovery example of CONFIGURATION.md is a valid configuration.
func TestConfigurationDocDiscoveryExampleLoads(t *testing.T) {
	doc, err := os.ReadFile("../CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Discovery\n")
	if !ok {
		t.Fatal(`CONFIGURATION.md has no "## Discovery" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, example, ok := strings.Cut(section, "\n### Example\n")
	if !ok {
		t.Fatal(`the Discovery section has no "### Example"`)
	}
	_, block, ok := strings.Cut(example, "```yaml\n")
	if !ok {
		t.Fatal("the discovery example has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	cfg, err := Load([]byte(block), t.TempDir())
	if err != nil {
		t.Fatalf("the discovery example of CONFIGURATION.md does not load: %v", err)
	}
	if !cfg.Discovery.Enabled() || len(cfg.Discovery.RelabelConfigs) != 3 || cfg.Discovery.TargetDefaults.MaxNumSeqs != 256 {
		t.Errorf("discovery example loaded as %+v", cfg.Discovery)
	}
}
