package collector

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/go-kit/log/level"
)

// ScrapeState is the outcome of a target's last scrape of /metrics, for the
// landing page.
type ScrapeState struct {
	At       time.Time     // when the scrape started
	Duration time.Duration // how long it took
	Up       bool          // it succeeded
	// DownSince is when the outage began: the start of the first failed
	// scrape since the target was last up (zero while it is up).
	DownSince time.Time
	// Err is why it failed ("" when Up). It never holds credentials: the
	// scrape URL in it is reduced to scheme, host and path (no user
	// information, no query), and no request header is ever part of it.
	Err string
	// Engine is the profile the payload was read with, EngineUnknown when
	// none matched ("" when the scrape failed); FamiliesSeen then names a
	// few of the payload's families (scrubbed).
	Engine       string
	FamiliesSeen []string
	// SleepLevel is vLLM's sleep mode: 0 awake, 1 or 2 the level it sleeps
	// at (the deepest over models); -1 when the engine does not say.
	SleepLevel int
}

// LastScrape returns the state of target's last scrape; ok is false for a
// target the collector does not scrape or has not scraped yet.
func (m *Manager) LastScrape(target string) (st ScrapeState, ok bool) {
	m.withTarget(target, func(s *scraper) {
		if s.attempted {
			st, ok = s.last, true
		}
	})
	return st, ok
}

// safeError renders a scrape error with every URL in it reduced to scheme,
// host and path, so that a password in the user information or a token in
// the query of a configured URL never reaches logs or pages.
func safeError(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			safe := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
			// Rebuild the message with the safe URL in place of the original.
			orig := ue.Error()
			ue2 := &url.Error{Op: ue.Op, URL: safe, Err: ue.Err}
			msg = strings.Replace(msg, orig, ue2.Error(), 1)
		}
	}
	return msg
}

// noteScrapeLocked records the outcome of a scrape in s.last and logs
// changes: the first failure of a target at info (warning when it was up),
// a failure whose reason differs from the previous one, and the recovery.
// Repeats of the same failure are logged at debug only.
func (s *scraper) noteScrapeLocked(at time.Time, dur time.Duration, err error) {
	prev, first := s.last, !s.attempted
	s.attempted = true
	s.last = ScrapeState{At: at, Duration: dur, Up: err == nil, Err: s.red.String(safeError(err)), SleepLevel: -1}
	switch {
	case err == nil:
	case first || prev.Up:
		s.last.DownSince = at
	default:
		s.last.DownSince = prev.DownSince
	}
	if err == nil {
		// What the payload said is set once it is read (scrapeOnce); until
		// then the previous scrape's holds.
		s.last.Engine, s.last.FamiliesSeen, s.last.SleepLevel = prev.Engine, prev.FamiliesSeen, prev.SleepLevel
	}
	switch {
	case err != nil && !first && prev.Up:
		level.Warn(s.logger).Log("msg", "scrape of vLLM metrics failed", "err", s.last.Err)
	case err != nil && (first || prev.Err != s.last.Err):
		level.Info(s.logger).Log("msg", "scrape of vLLM metrics failed", "err", s.last.Err)
	case err != nil:
		level.Debug(s.logger).Log("msg", "scrape of vLLM metrics failed", "err", s.last.Err)
	case !first && !prev.Up:
		level.Info(s.logger).Log("msg", "scrape of vLLM metrics succeeded again", "failed_since", prev.DownSince.UTC())
	}
}

// ScrapeAnswered returns when the last scrape of target's /metrics started,
// ok only when it succeeded: the prober's health of a scraped target
// (prober.Options.ScrapeAnswered).
func (m *Manager) ScrapeAnswered(target string) (at time.Time, ok bool) {
	st, known := m.LastScrape(target)
	if !known || !st.Up {
		return time.Time{}, false
	}
	return st.At, true
}
