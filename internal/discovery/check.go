package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	yaml "go.yaml.in/yaml/v2"

	"github.com/vllm-prober/vllm_prober/config"
)

// Check is the load-time check of cfg, which must have been validated: the
// daemon's load, and so --config.check, refuses what Prometheus would refuse
// only once a discoverer starts. It builds every discoverer once, as the
// daemon's discovery manager will (a kubeconfig_file that does not load, an
// HTTP client that cannot be built fail here), and reads every file the
// file_sd_configs match now, as promtool check config does; once running, a
// file that breaks keeps its last good targets (Prometheus' file
// discoverer). The discoverers built are never run.
func Check(cfg config.Discovery) error {
	reg := prometheus.NewRegistry()
	metrics, err := promdiscovery.RegisterSDMetrics(reg, promdiscovery.NewRefreshMetrics(reg))
	if err != nil {
		// A fresh registry has no collisions: only a broken mechanism gets here.
		return fmt.Errorf("registering discovery metrics on a fresh registry: %w", err)
	}
	for _, sd := range cfg.Configs() {
		if inCluster(sd.Config) {
			// Its client comes from the pod's service account: outside a
			// cluster (--config.check in CI) it cannot be built, and inside
			// one a failure is logged when it starts, as Prometheus does.
			continue
		}
		if _, err := sd.Config.NewDiscoverer(promdiscovery.DiscovererOptions{
			Logger:  promslog.NewNopLogger(),
			Metrics: metrics[sd.Config.Name()],
			SetName: sd.Name,
		}); err != nil {
			return fmt.Errorf("%s: %w", sd.Name, err)
		}
	}
	for i, fc := range cfg.FileSDConfigs {
		if err := checkFiles(fc.Files); err != nil {
			return fmt.Errorf("file_sd_configs[%d]: %w", i, err)
		}
	}
	return nil
}

// inCluster reports whether c is a kubernetes_sd_configs entry without
// api_server and kubeconfig_file: one that talks to the API server of the
// cluster it runs in.
func inCluster(c promdiscovery.Config) bool {
	k, ok := c.(*kubernetes.SDConfig)
	return ok && k.APIServer.URL == nil && k.KubeConfig == ""
}

// checkFiles reads every file patterns match now and returns the first that
// cannot be read or parsed.
func checkFiles(patterns []string) error {
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		if err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		for _, f := range files {
			if err := checkFile(f); err != nil {
				return err
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
