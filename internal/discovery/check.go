package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/prometheus/discovery/targetgroup"
	yaml "go.yaml.in/yaml/v2"
)

// fileSet is the file patterns of one file_sd_configs entry.
type fileSet struct {
	name     string
	patterns []string
}

// CheckFiles reads every file the file_sd_configs match now and returns the
// first that cannot be read or parsed, as promtool check config does. The
// daemon's load, and so --config.check, refuses such a configuration; once it
// runs, a file that breaks keeps its last good targets (Prometheus' file
// discoverer).
func (m *Manager) CheckFiles() error {
	for _, fs := range m.files {
		for _, p := range fs.patterns {
			files, err := filepath.Glob(p)
			if err != nil {
				return fmt.Errorf("%s: %q: %w", fs.name, p, err)
			}
			for _, f := range files {
				if err := checkFile(f); err != nil {
					return fmt.Errorf("%s: %w", fs.name, err)
				}
			}
		}
	}
	return nil
}

// checkFile parses one file_sd file as Prometheus' file discoverer does: JSON
// for .json, strict YAML for .yml and .yaml, a list of target groups.
func checkFile(path string) error {
	content, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var groups []*targetgroup.Group
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json":
		err = json.Unmarshal(content, &groups)
	case ".yml", ".yaml":
		err = yaml.UnmarshalStrict(content, &groups)
	default:
		return fmt.Errorf("%s: unsupported file extension %q", path, ext)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for i, g := range groups {
		if g == nil {
			return fmt.Errorf("%s: entry %d: %w", path, i, errors.New("nil target group item found"))
		}
	}
	return nil
}
