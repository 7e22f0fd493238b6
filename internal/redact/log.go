package redact

import (
	"fmt"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// Logger wraps next so that every value logged, at every level, loses its
// secrets: strings, errors and Stringers are scrubbed (keys are ours). Place it
// above or below level.NewFilter: level values pass untouched.
func Logger(next log.Logger, r *Redactor) log.Logger {
	return log.LoggerFunc(func(keyvals ...any) error {
		out := make([]any, len(keyvals))
		for i, v := range keyvals {
			switch x := v.(type) {
			case level.Value:
				out[i] = v // the level filter matches on it
			case string:
				out[i] = r.String(x)
			case error:
				out[i] = r.String(x.Error())
			case fmt.Stringer:
				out[i] = r.String(x.String())
			default:
				out[i] = v
			}
		}
		return next.Log(out...)
	})
}
