// Package logging builds the go-kit logger of both binaries, vllm_prober and
// vllm_sim, so that their lines have one layout:
//
//	ts=2026-11-26T08:00:00.000Z level=info caller=main.go:42 msg="Listening" address=:8000
//
// ts first, then level, then what the caller adds (caller, msg, ...),
// whatever wraps the logger on the way (a redacting logger, log.With,
// level.Info): go-kit puts a level.Info prefix before the context of the
// logger it wraps, so a timestamp added with log.With would come first or
// second depending on the wrapping.
package logging

import (
	"io"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// New returns a logger writing to w in format ("logfmt" or "json") that
// drops messages below lvl ("debug", "info", "warn" or "error") and stamps
// "ts" (UTC) first. It adds no caller: callers add log.DefaultCaller where
// they wrap it last.
func New(w io.Writer, lvl, format string) log.Logger {
	w = log.NewSyncWriter(w)
	var logger log.Logger
	if format == "json" {
		logger = log.NewJSONLogger(w)
	} else {
		logger = log.NewLogfmtLogger(w)
	}
	logger = tsFirst{next: logger}
	return level.NewFilter(logger, level.Allow(level.ParseDefault(lvl, level.InfoValue())))
}

// tsFirst puts the timestamp before every other key.
type tsFirst struct{ next log.Logger }

func (l tsFirst) Log(keyvals ...any) error {
	kv := make([]any, 0, len(keyvals)+2)
	kv = append(kv, "ts", log.DefaultTimestampUTC())
	return l.next.Log(append(kv, keyvals...)...)
}
