package collector

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Naming eras of vLLM's metrics, the value of the metrics_era info label.
const (
	EraV1     = "v1"
	EraV010   = "v0.10"
	EraLegacy = "legacy"
)

// Bucket is one cumulative histogram bucket.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Histogram is a classic cumulative histogram.
type Histogram struct {
	Buckets []Bucket // sorted by UpperBound, cumulative, the last one is +Inf
	Sum     float64
	Count   float64
}

// Model holds the normalised metrics of one served model (one model_name).
type Model struct {
	Name string
}

// Snapshot is one normalised scrape.
type Snapshot struct {
	Time   time.Time
	Era    string
	Models map[string]*Model
}

// Scrape fetches url (the full /metrics URL) once and normalises it.
func Scrape(ctx context.Context, client *http.Client, url string) (*Snapshot, error) {
	return nil, errors.New("not implemented")
}
