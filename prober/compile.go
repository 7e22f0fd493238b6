package prober

import (
	"fmt"
	"reflect"

	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober/probe"
)

// compileModules compiles the modules of a configuration into specs, once:
// a module equal to the one already compiled under its name keeps its spec
// (and its pairs their prompt estimates), so that re-applying a
// configuration whose targets alone changed compiles nothing. It changes
// nothing itself: Apply keeps the specs once nothing else can fail. m.mu must
// be held.
func (m *Manager) compileModules(mods map[string]config.Module) (map[string]*probe.Spec, int, error) {
	specs := make(map[string]*probe.Spec, len(mods))
	compiled := 0
	for name, mod := range mods {
		if old, ok := m.specs[name]; ok && reflect.DeepEqual(*old.Module(), mod) {
			specs[name] = old
			continue
		}
		spec, err := probe.Compile(name, mod)
		if err != nil {
			return nil, 0, fmt.Errorf("compiling the probe modules: %w", err)
		}
		specs[name] = spec
		compiled++
	}
	return specs, compiled, nil
}

// Compilations is how many modules the Manager compiled since it was built:
// configuration work, which ApplyConfig does for new and changed modules
// and a discovery refresh (SetTargets) never does.
func (m *Manager) Compilations() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.compilations
}
