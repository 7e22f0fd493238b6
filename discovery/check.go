package discovery

import "fmt"

// CheckFiles reads every file the file_sd_configs match now and returns the
// first that cannot be read or parsed, as promtool check config does. The
// daemon's load, and so --config.check, refuses such a configuration; once it
// runs, a file that breaks keeps its last good targets (fileProvider).
func (m *Manager) CheckFiles() error {
	for i, p := range m.providers {
		if fp, ok := p.(*fileProvider); ok {
			if err := fp.check(); err != nil {
				return fmt.Errorf("%s: %w", m.names[i], err)
			}
		}
	}
	return nil
}
