package simulator

import (
	"fmt"
	"strings"
)

// LoRAModule is one adapter served next to the base model, as given to
// vLLM's --lora-modules (name=path). vLLM serves requests whose "model" is
// the adapter's name with the base model plus the adapter, answers with the
// adapter's name in "model", lists the adapter in /v1/models with parent =
// the base model and root = the adapter's path, and counts its traffic under
// the base model's model_name label in /metrics (vllm/entrypoints/openai/
// serving_models.py, show_available_models; vllm/v1/metrics/loggers.py).
type LoRAModule struct {
	Name string
	Path string // empty: the card's root is the base model's name
}

// ParseLoRAModules parses --lora-modules values: each is one or more
// comma-separated name[=path] items. Names must be unique and must differ
// from the base model's name.
func ParseLoRAModules(values []string) ([]LoRAModule, error) {
	var mods []LoRAModule
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				return nil, fmt.Errorf("lora module %q: empty item", v)
			}
			name, path, _ := strings.Cut(item, "=")
			name, path = strings.TrimSpace(name), strings.TrimSpace(path)
			if name == "" {
				return nil, fmt.Errorf("lora module %q: empty name", item)
			}
			mods = append(mods, LoRAModule{Name: name, Path: path})
		}
	}
	return mods, nil
}

func validateLoRAModules(base string, mods []LoRAModule) error {
	seen := map[string]bool{base: true}
	for _, m := range mods {
		if m.Name == "" {
			return fmt.Errorf("lora module with an empty name")
		}
		if seen[m.Name] {
			return fmt.Errorf("lora module %q: name already served", m.Name)
		}
		seen[m.Name] = true
	}
	return nil
}

// servedModel returns the name a request for model is answered under: the
// base model when model is empty or the base name, the adapter's name when
// it names an adapter. ok is false for an unknown model.
func (s *Simulator) servedModel(model string) (name string, ok bool) {
	if model == "" || model == s.cfg.Model {
		return s.cfg.Model, true
	}
	for _, m := range s.cfg.LoRAModules {
		if m.Name == model {
			return m.Name, true
		}
	}
	return "", false
}
