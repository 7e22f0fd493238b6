package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	yaml "go.yaml.in/yaml/v2"
)

// SafeConfig holds the running configuration and reloads it, in the manner of
// blackbox_exporter's SafeConfig. Readers take a snapshot with Config and must treat
// it as read-only; a reload swaps the pointer, it never mutates the old value.
type SafeConfig struct {
	// reloadMu serialises reloads so that two of them (SIGHUP and POST /-/reload at
	// once) cannot interleave their apply calls.
	reloadMu sync.Mutex

	mu       sync.RWMutex
	c        *Config
	checksum string

	apply         func(*Config) error
	reloadSuccess prometheus.Gauge
	reloadSeconds prometheus.Gauge
	now           func() time.Time
}

// NewSafeConfig returns an empty SafeConfig whose reload gauges are registered with
// reg (nil registers nothing). apply, if not nil, is called with every new valid
// configuration before it becomes current; when it fails the reload fails and the
// previous configuration stays current. apply is never called concurrently.
func NewSafeConfig(reg prometheus.Registerer, apply func(*Config) error) *SafeConfig {
	f := promauto.With(reg)
	return &SafeConfig{
		apply: apply,
		reloadSuccess: f.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_prober_config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful (1) or not (0).",
		}),
		reloadSeconds: f.NewGauge(prometheus.GaugeOpts{
			Name: "vllm_prober_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration reload, in seconds.",
		}),
		now: time.Now,
	}
}

// Config returns the current configuration, nil before the first successful load.
func (sc *SafeConfig) Config() *Config {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.c
}

// Checksum returns the hex sha256 of the current configuration's files ("" before
// the first successful load).
func (sc *SafeConfig) Checksum() string {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.checksum
}

// ReloadConfig loads the file at path and makes it current. It returns changed=false
// and no error when the file and the baseline files it names are byte-for-byte those
// of the current configuration (sha256), so a SIGHUP storm costs nothing. On any
// error the current configuration keeps running. Either way it sets
// vllm_prober_config_last_reload_successful, and on success
// vllm_prober_config_last_reload_success_timestamp_seconds.
func (sc *SafeConfig) ReloadConfig(path string) (changed bool, err error) {
	sc.reloadMu.Lock()
	defer sc.reloadMu.Unlock()
	defer func() {
		if err != nil {
			sc.reloadSuccess.Set(0)
			return
		}
		sc.reloadSuccess.Set(1)
		sc.reloadSeconds.Set(float64(sc.now().UnixNano()) / 1e9)
	}()

	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("error reading config file: %w", err)
	}
	cfg, err := loadBytes(data, path)
	if err != nil {
		return false, err
	}
	sum, err := checksum(data, cfg)
	if err != nil {
		return false, err
	}
	if sum == sc.Checksum() {
		return false, nil
	}
	if sc.apply != nil {
		if err := sc.apply(cfg); err != nil {
			return false, fmt.Errorf("error applying config file %q: %w", path, err)
		}
	}
	sc.mu.Lock()
	sc.c, sc.checksum = cfg, sum
	sc.mu.Unlock()
	return true, nil
}

// loadBytes is LoadFile after the read, so that ReloadConfig checksums exactly the
// bytes it parsed.
func loadBytes(data []byte, path string) (*Config, error) {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("error reading config file: %w", err)
	}
	cfg, err := Load(data, dir)
	if err != nil {
		return nil, fmt.Errorf("error parsing config file %q: %w", path, err)
	}
	return cfg, nil
}

// checksum covers the configuration file, every baseline file it names and
// every credential file of its HTTP clients: a baseline edited in place, or a
// rotated credential, must be picked up by a reload even though the main file
// did not change. A missing baseline file hashes as absent; the baseline loader
// reports it.
func checksum(data []byte, cfg *Config) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", len(data))
	h.Write(data)
	for _, b := range cfg.Baselines {
		content, err := os.ReadFile(b.File)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(h, "\n%s absent\n", b.File)
			continue
		case err != nil:
			return "", fmt.Errorf("error reading baseline %q: %w", b.Name, err)
		}
		fmt.Fprintf(h, "\n%s %d\n", b.File, len(content))
		h.Write(content)
	}
	if err := hashCredentialFiles(h, cfg); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// String renders c as YAML for the /config page. Secrets (credentials, bearer
// tokens, passwords, secret headers) are prometheus/common config.Secret values and
// render as "<secret>"; proxy URLs render with their password replaced.
func (c *Config) String() string {
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Sprintf("<error marshaling config: %s>", err)
	}
	return string(b)
}
