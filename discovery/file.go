package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/discovery/sdconfig"
	"github.com/vllm-prober/vllm_prober/internal/decodeerr"
)

// settleDelay groups the burst of events one file write causes (create, write,
// chmod, rename) into one re-read.
const settleDelay = 100 * time.Millisecond

// fileProvider reads target groups from the files matching its patterns. It
// re-reads them when the watched directories change and every refresh interval.
// A file that cannot be read or parsed keeps the groups it last had; a file
// that no longer exists (or no longer matches) takes its groups away.
type fileProvider struct {
	cfg    sdconfig.FileSDConfig
	logger log.Logger

	lastGood map[string][]*targetgroup.Group // by file path
	sent     []*targetgroup.Group
	hasSent  bool
}

func newFileProvider(cfg sdconfig.FileSDConfig, logger log.Logger) *fileProvider {
	return &fileProvider{cfg: cfg, logger: logger, lastGood: map[string][]*targetgroup.Group{}}
}

func (p *fileProvider) run(ctx context.Context, send func([]*targetgroup.Group)) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		level.Error(p.logger).Log("msg", "Cannot watch files, re-reading them every refresh_interval only", "err", err)
	} else {
		defer watcher.Close()
		events, errs = watcher.Events, watcher.Errors
	}
	watched := map[string]bool{}
	watch := func() {
		if watcher == nil {
			return
		}
		for _, pat := range p.cfg.Files {
			dir := filepath.Dir(pat)
			if watched[dir] {
				continue
			}
			// A directory that does not exist yet is retried on every refresh.
			if err := watcher.Add(dir); err != nil {
				level.Debug(p.logger).Log("msg", "Cannot watch directory yet", "dir", dir, "err", err)
				continue
			}
			watched[dir] = true
		}
	}

	ticker := time.NewTicker(time.Duration(p.cfg.RefreshInterval))
	defer ticker.Stop()
	settle := time.NewTimer(settleDelay)
	settle.Stop()
	defer settle.Stop()
	settling := false

	refresh := func() {
		watch()
		groups := p.refresh()
		if p.hasSent && reflect.DeepEqual(groups, p.sent) {
			return
		}
		p.hasSent, p.sent = true, groups
		send(groups)
	}
	refresh()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Any event counts, not only those naming a matching file:
			// Kubernetes updates a mounted ConfigMap by swapping a
			// "..data" symlink, which no pattern matches.
			if !settling {
				settling = true
				settle.Reset(settleDelay)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			level.Error(p.logger).Log("msg", "File watch error", "err", err)
		case <-settle.C:
			settling = false
			refresh()
		case <-ticker.C:
			refresh()
		}
	}
}

// refresh reads every matching file and returns the groups of all of them, in
// file order.
func (p *fileProvider) refresh() []*targetgroup.Group {
	files := p.files()
	good := make(map[string][]*targetgroup.Group, len(files))
	var all []*targetgroup.Group
	for _, f := range files {
		groups, err := readTargetFile(f)
		if err != nil {
			old, ok := p.lastGood[f]
			level.Error(p.logger).Log("msg", "Cannot read target file, keeping its last good targets", "file", f, "kept_groups", len(old), "err", err)
			if !ok {
				continue
			}
			groups = old
		}
		good[f] = groups
		all = append(all, groups...)
	}
	p.lastGood = good
	return all
}

// files returns the files the patterns match now, sorted, each once.
func (p *fileProvider) files() []string {
	var files []string
	seen := map[string]bool{}
	for _, pat := range p.cfg.Files {
		matches, err := filepath.Glob(pat)
		if err != nil { // validated at load time; cannot happen
			level.Error(p.logger).Log("msg", "Bad file pattern", "pattern", pat, "err", err)
			continue
		}
		for _, f := range matches {
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	sort.Strings(files)
	return files
}

// check reads every file the patterns match now and returns the first error.
func (p *fileProvider) check() error {
	for _, f := range p.files() {
		if _, err := readTargetFile(f); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// readTargetFile parses a JSON or YAML list of target groups, as Prometheus
// file_sd does: [{"targets": ["host:port", ...], "labels": {...}}, ...].
func readTargetFile(path string) ([]*targetgroup.Group, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var groups []*targetgroup.Group
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json":
		// Group by group, so that a type error names its group (decodeerr.JSON
		// names the key and the shapes, never a Go type).
		dec := json.NewDecoder(bytes.NewReader(data))
		var raw []json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("parsing JSON: %w", decodeerr.JSON(err))
		}
		if dec.More() {
			return nil, fmt.Errorf("parsing JSON: trailing data after the list of target groups")
		}
		groups = make([]*targetgroup.Group, len(raw))
		for i, r := range raw {
			if err := json.Unmarshal(r, &groups[i]); err != nil {
				return nil, fmt.Errorf("parsing JSON: target group %d: %w", i, decodeerr.JSON(err))
			}
		}
	case ".yml", ".yaml":
		if err := yaml.UnmarshalStrict(data, &groups); err != nil {
			return nil, fmt.Errorf("parsing YAML: %w", decodeerr.YAML(err, "in a target group"))
		}
	default:
		return nil, fmt.Errorf("extension %q is not .json, .yml or .yaml", ext)
	}
	for i, g := range groups {
		if err := checkGroup(g); err != nil {
			return nil, fmt.Errorf("target group %d: %w", i, err)
		}
		g.Source = fmt.Sprintf("%s:%d", path, i)
		if g.Labels == nil {
			g.Labels = model.LabelSet{}
		}
		g.Labels[FilePathLabel] = model.LabelValue(path)
	}
	return groups, nil
}

// checkGroup rejects what Prometheus rejects: a null group, an empty target
// and an invalid label name.
func checkGroup(g *targetgroup.Group) error {
	if g == nil {
		return fmt.Errorf("group is null")
	}
	for i, t := range g.Targets {
		if t[model.AddressLabel] == "" {
			return fmt.Errorf("target %d is empty", i)
		}
	}
	for n := range g.Labels {
		if !labelNameRE.MatchString(string(n)) {
			return fmt.Errorf("label name %q is not valid", n)
		}
	}
	return nil
}
