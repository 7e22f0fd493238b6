package collector

import (
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vllm-prober/vllm_prober/internal/redact"
)

// Every string a target's /metrics, /version and /v1/models send that
// becomes a label value (model_name, finished_reason, version, the model ids
// and their base models) passes red.Label here, right after it is read and
// before anything keeps or cuts it: a value that holds a configured secret
// becomes redact.Placeholder, and a warning names the target and the field,
// never the value.

// scrubSnapshot replaces the label values of snap that hold a secret.
func scrubSnapshot(red Scrubber, logger log.Logger, snap *Snapshot) {
	if snap == nil || red.MaxLen() == 0 {
		return
	}
	for name, m := range snap.Models {
		clean, held := red.Label(name)
		if held {
			warnHeld(logger, "/metrics model_name")
			delete(snap.Models, name)
			if prev := snap.Models[clean]; prev != nil {
				continue // two secret-bearing names: keep one series
			}
			m.Name = clean
			snap.Models[clean] = m
		}
		for r, v := range m.RequestSuccess {
			if c, held := red.Label(r); held {
				warnHeld(logger, "/metrics finished_reason")
				delete(m.RequestSuccess, r)
				m.RequestSuccess[c] += v
			}
		}
	}
}

// scrubGateway replaces the backend names of a gateway's view that hold a
// secret: they become label values.
func scrubGateway(red Scrubber, logger log.Logger, v *GatewayView) {
	if v == nil || red.MaxLen() == 0 {
		return
	}
	for name, n := range v.Backends {
		if clean, held := red.Label(name); held {
			warnHeld(logger, "gateway /metrics backend")
			delete(v.Backends, name)
			v.Backends[clean] += n
		}
	}
}

// scrub replaces the label values of info that hold a secret.
func (info *ServerInfo) scrub(red Scrubber, logger log.Logger) {
	if red.MaxLen() == 0 {
		return
	}
	if v, held := red.Label(info.Version); held {
		warnHeld(logger, "/version version")
		info.Version = v
	}
	for id, n := range info.MaxModelLen {
		if c, held := red.Label(id); held {
			delete(info.MaxModelLen, id)
			info.MaxModelLen[c] = n
		}
	}
	for id, base := range info.Base {
		c, held := red.Label(id)
		b, bheld := red.Label(base)
		if held || bheld {
			warnHeld(logger, "/v1/models id")
			delete(info.Base, id)
			info.Base[c] = b
		}
	}
}

func warnHeld(logger log.Logger, field string) {
	level.Warn(logger).Log("msg", "A value the target sent holds a configured secret: it is shown as "+redact.Placeholder, "field", field)
}
