package exposition

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Registerer routes registrations: every collector goes to main, the
// registry every series is gathered from; a Partitioned one also becomes a
// source of the cache, any other one also goes to rest, the registry of
// the series the cache does not hold. Components register as they would
// with one registry and need not know of the cache.
type Registerer struct {
	main, rest prometheus.Registerer
	cache      *Cache
}

// NewRegisterer returns a Registerer of cache over main and rest; both
// must already add the labels the cache adds (NewCache).
func NewRegisterer(cache *Cache, main, rest prometheus.Registerer) *Registerer {
	return &Registerer{main: main, rest: rest, cache: cache}
}

// Register implements prometheus.Registerer.
func (r *Registerer) Register(c prometheus.Collector) error {
	if err := r.main.Register(c); err != nil {
		return err
	}
	var err error
	if p, ok := c.(Partitioned); ok {
		err = r.cache.add(p)
	} else {
		err = r.rest.Register(c)
	}
	if err != nil {
		r.main.Unregister(c)
	}
	return err
}

// MustRegister implements prometheus.Registerer.
func (r *Registerer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer. A Partitioned collector
// cannot be unregistered: the components register theirs for the life of
// the daemon.
func (r *Registerer) Unregister(c prometheus.Collector) bool {
	if _, ok := c.(Partitioned); ok {
		panic(errors.New("exposition: a partitioned collector cannot be unregistered"))
	}
	r.rest.Unregister(c)
	return r.main.Unregister(c)
}
