package collector

import (
	"maps"
	"slices"
)

// View is what the last scrapes of one target tell, for the series that
// join the collector with other sources (the compare package): the newest
// snapshot's models with their values over the rate window, and the
// models the server serves. Read-only: the snapshots and the derived values
// are never changed once made.
type View struct {
	// Models are the models of the newest snapshot, sorted by name.
	Models []ModelView
	// Base maps every model /v1/models lists to the model_name its traffic
	// is counted under in /metrics: a LoRA adapter's base model, else the
	// model itself.
	Base map[string]string
	// MaxNumSeqs is the target's configured max_num_seqs, else the
	// server's own slot count (llama-server's /props); 0: unknown.
	MaxNumSeqs int
	// PeakFLOPSPerGPU is the target's peak_flops_per_gpu, 0 when not set.
	PeakFLOPSPerGPU float64

	latest *Snapshot
	info   ServerInfo
}

// ModelView is one model of a View.
type ModelView struct {
	Name  string
	Model *Model // its values in the newest snapshot
	// Derived are its values over the rate window; nil before two scrapes.
	Derived *Derived
	// TTFTIncludesQueue is whether its server TTFT counts the queue time
	// (ttft.go): what a window showed, else vLLM's own accounting.
	TTFTIncludesQueue bool
}

// Model returns the view of the named model, false when the newest
// snapshot has none.
func (v *View) Model(name string) (*ModelView, bool) {
	i, ok := slices.BinarySearchFunc(v.Models, name, func(m ModelView, name string) int {
		switch {
		case m.Name < name:
			return -1
		case m.Name > name:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, false
	}
	return &v.Models[i], true
}

// View returns what the last scrapes of target tell; false when the target
// is not scraped or its last scrape failed.
func (m *Manager) View(target string) (v View, ok bool) {
	m.withTarget(target, func(s *scraper) { v, ok = s.viewLocked() })
	return v, ok
}

// viewLocked is View of s. s.mu must be held.
func (s *scraper) viewLocked() (View, bool) {
	if !s.up || len(s.ring) == 0 {
		return View{}, false
	}
	latest := s.ring[len(s.ring)-1]
	maxNumSeqs := s.maxNumSeqs
	if maxNumSeqs == 0 {
		maxNumSeqs = s.info.Slots // the server's own count (llama-server's /props)
	}
	v := View{Base: s.info.Base, MaxNumSeqs: maxNumSeqs, PeakFLOPSPerGPU: s.peakFLOPS, latest: latest, info: s.info,
		Models: make([]ModelView, 0, len(latest.Models))}
	for _, name := range slices.Sorted(maps.Keys(latest.Models)) {
		v.Models = append(v.Models, ModelView{Name: name, Model: latest.Models[name], Derived: s.derived[name],
			TTFTIncludesQueue: s.ttftIncludesQueueLocked(name)})
	}
	return v, true
}
