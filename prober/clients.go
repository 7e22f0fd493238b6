package prober

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	commoncfg "github.com/prometheus/common/config"
)

// maxClientBucket bounds how many distinct configurations that marshal alike
// (they differ only in secrets, which marshal as "<secret>") a clientCache
// compares against, so that Apply stays linear in the number of targets.
const maxClientBucket = 16

// clientCache shares one *http.Client (and so one Transport, one connection
// pool) between the targets whose HTTP client configurations are equal.
// Without it every target has a Transport of its own, and each keeps its own
// idle keep-alive connection with two goroutines and two 4 KiB buffers. The
// caller serialises access.
type clientCache struct {
	buckets map[string][]*sharedClient // by the marshalled configuration
	byPtr   map[*http.Client]*sharedClient
}

type sharedClient struct {
	key    string
	cfg    commoncfg.HTTPClientConfig
	client *http.Client
	refs   int
}

func newClientCache() *clientCache {
	return &clientCache{buckets: map[string][]*sharedClient{}, byPtr: map[*http.Client]*sharedClient{}}
}

// acquire returns a client for cfg, shared with the other holders of an equal
// configuration. Each acquire must be paired with a release.
func (c *clientCache) acquire(cfg commoncfg.HTTPClientConfig) (*http.Client, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		data = nil // not shareable by key: compared in the "" bucket
	}
	key := string(data)
	bucket := c.buckets[key]
	for _, s := range bucket {
		if reflect.DeepEqual(s.cfg, cfg) {
			s.refs++
			return s.client, nil
		}
	}
	client, err := commoncfg.NewClientFromConfig(cfg, "vllm_prober")
	if err != nil {
		return nil, fmt.Errorf("building HTTP client: %w", err)
	}
	s := &sharedClient{key: key, cfg: cfg, client: client, refs: 1}
	c.byPtr[client] = s
	if len(bucket) < maxClientBucket {
		c.buckets[key] = append(bucket, s)
	}
	return client, nil
}

// release drops one hold on client; the last one closes its idle connections,
// whose goroutines would otherwise linger until the idle timeout.
func (c *clientCache) release(client *http.Client) {
	s := c.byPtr[client]
	if s == nil {
		return
	}
	s.refs--
	if s.refs > 0 {
		return
	}
	delete(c.byPtr, client)
	bucket := c.buckets[s.key]
	for i, b := range bucket {
		if b == s {
			bucket = append(bucket[:i:i], bucket[i+1:]...)
			break
		}
	}
	if len(bucket) == 0 {
		delete(c.buckets, s.key)
	} else {
		c.buckets[s.key] = bucket
	}
	client.CloseIdleConnections()
}
