package web

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/config"
	"github.com/vllm-prober/vllm_prober/prober"
)

// flappingRatio: a pair whose last probe succeeded but whose recent history
// (the last --history.limit probes) succeeded less often than this is
// "flapping", not healthy.
const flappingRatio = 0.9

// Pair states, in the order the summary lists them.
const (
	stateFailing   = "failing"   // the last probe failed
	stateFlapping  = "flapping"  // the last probe succeeded, too few recent ones did
	stateRegressed = "regressed" // TTFT or TPOT above Options.RegressionThreshold × the baseline
	stateHealthy   = "healthy"
	statePending   = "pending" // no probe finished yet
)

var stateOrder = []string{stateFailing, stateFlapping, stateRegressed, stateHealthy, statePending}

// pairRow is one (target, module) row of the summary.
type pairRow struct {
	Target, Module, Model string
	State                 string
	Reason                string // why it is in its state; "" when healthy
	Since                 string // "failing for 11m", "last success 12s ago"
	Hour, Hist            ratio  // success ratios
	TTFT, TPOT            ratio  // baseline ratios; N == 0 when unknown
	Labels                string // "k=v k=v", also the filter's data
	Section, Record       string // links: the target's section, the stored record of its last failure
	RecordAge             string // how long ago that failure was, "12s ago"
	Scrape                string // the collector's last scrape of the target, "" when unknown
	ScrapeBad             bool
	PerModel              bool // the target has models: the module cell names the model
	// Span is how many rows, from this one, share its target's cells (last
	// scrape, labels), and Covered says that a row above holds them
	// (spanTargets); the zero values are a row of its own. ReasonSpan and
	// ReasonCovered are the same for the reason, shared by the target's rows
	// that have the same one (every module of a target that is down).
	Span, ReasonSpan       int
	Covered, ReasonCovered bool
}

// spanTargets sets the rows' Span: consecutive rows of one target (its
// modules, when they are in the same state) share one last-scrape cell and
// one labels cell, which are the target's, not the pair's. Without it those
// two cells, repeated on every module's row, were a third of the page when a
// whole fleet is down (BenchmarkLandingPageOutage). It returns rows.
func spanTargets(rows []pairRow) []pairRow {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].Target == rows[i].Target {
			rows[j].Covered = true
			j++
		}
		rows[i].Span = j - i
		for k := i; k < j; {
			l := k + 1
			for l < j && rows[l].Reason == rows[k].Reason {
				rows[l].ReasonCovered = true
				l++
			}
			rows[k].ReasonSpan = l - k
			k = l
		}
		i = j
	}
	return rows
}

// spanned writes a cell that spans n rows (n > 1), or a plain one; nothing
// when covered, a row above holds the cell.
func spanned(w func(...string), n int, covered bool, class, text string) {
	switch {
	case covered:
		return
	case n > 1:
		w(`<td rowspan="`, strconv.Itoa(n), `"`)
	default:
		w("<td")
	}
	if class != "" {
		w(` class="`, class, `"`)
	}
	w(">", html.EscapeString(text))
}

// ratio is a success ratio (OK of N), shown as the share that failed, or a
// baseline ratio (V, N=1).
type ratio struct {
	OK, N int
	V     float64
	Hot   bool // coloured: failures, or above the alert threshold
}

func (r ratio) Percent() string {
	if r.N == 0 {
		return "-"
	}
	if failed := r.N - r.OK; failed > 0 {
		// What an on-call needs of a flapping pair is how often it fails.
		return strconv.Itoa(int(math.Ceil(100*float64(failed)/float64(r.N)))) + "% failed (" + strconv.Itoa(failed) + "/" + strconv.Itoa(r.N) + ")"
	}
	return "100% ok (" + strconv.Itoa(r.N) + ")"
}

func (r ratio) Times() string {
	if r.N == 0 {
		return "-"
	}
	return strconv.FormatFloat(r.V, 'f', 2, 64) + "×"
}

// summaryRows builds one row per (target, module) from the prober's
// per-pair statistics (no history is copied) and sorts them failing first,
// then flapping, regressed, healthy and pending; by target and module within.
func (h *handler) summaryRows(cfg *config.Config, stats []prober.PairStats, now time.Time) []pairRow {
	s := h.scrubber
	byName := make(map[string]*config.Target, len(cfg.Targets))
	for i := range cfg.Targets {
		byName[cfg.Targets[i].Name] = &cfg.Targets[i]
	}
	rows := make([]pairRow, 0, len(stats))
	for i := range stats {
		ps := &stats[i]
		t, ok := byName[ps.Target]
		if !ok {
			continue
		}
		r := pairRow{Target: ps.Target, Module: ps.Module, Model: ps.Model,
			Hour:     ratio{OK: ps.HourSuccesses, N: ps.HourProbes, Hot: ps.HourSuccesses < ps.HourProbes},
			Hist:     ratio{OK: ps.Successes, N: ps.Probes, Hot: ps.Successes < ps.Probes},
			Labels:   labelText(t.Labels),
			Section:  "target?" + url.Values{"name": {ps.Target}}.Encode() + "#" + sectionID(t, ps.Module, ps.Model),
			PerModel: t.Models != ""}
		if ps.LastFailureID != 0 {
			model := "" // only a `models:` target has a pair per model to pick
			if t.Models != "" {
				model = ps.Model
			}
			r.Record = recordURL(ps.Target, ps.Module, model, ps.LastFailureID)
			r.RecordAge = "record"
			if !ps.LastFailure.IsZero() {
				r.RecordAge = fmtAgo(now.Sub(ps.LastFailure)) + " ago"
			}
		}
		r.Scrape, r.ScrapeBad = h.scrapeText(ps.Target, now, summaryErrLen)
		if h.cmp != nil && t.Baseline != "" {
			if c, ok := h.cmp.Compare(ps.Target, ps.Module); ok {
				if !math.IsNaN(c.TTFT) {
					r.TTFT = ratio{V: c.TTFT, N: 1, Hot: c.TTFT > h.threshold}
				}
				if !math.IsNaN(c.TPOT) {
					r.TPOT = ratio{V: c.TPOT, N: 1, Hot: c.TPOT > h.threshold}
				}
			}
		}
		switch {
		case ps.LastProbe.IsZero():
			r.State, r.Since = statePending, "no probe yet"
		case ps.LastReason != "":
			r.State = stateFailing
			r.Reason = ps.LastReason
			if ps.LastStatusCode != 0 {
				r.Reason += " (HTTP " + strconv.Itoa(ps.LastStatusCode) + ")"
			}
			if ps.LastErr != "" {
				r.Reason += ": " + terseErr(s.scrub(ps.LastErr), summaryErrLen)
			}
			r.Since = "failing for " + fmtAgo(now.Sub(ps.FailingSince))
			if ps.LastSuccess.IsZero() {
				r.Since += ", no success yet"
			} else {
				r.Since += ", last success " + fmtAgo(now.Sub(ps.LastSuccess)) + " ago"
			}
		default:
			r.Since = "last success " + fmtAgo(now.Sub(ps.LastSuccess)) + " ago"
			switch {
			case ps.Probes > 0 && float64(ps.Successes) < flappingRatio*float64(ps.Probes):
				r.State = stateFlapping
				r.Reason = fmt.Sprintf("%d of the last %d probes failed", ps.Probes-ps.Successes, ps.Probes)
			case r.TTFT.Hot || r.TPOT.Hot:
				r.State = stateRegressed
				var why []string
				if r.TTFT.Hot {
					why = append(why, "TTFT "+r.TTFT.Times()+" baseline")
				}
				if r.TPOT.Hot {
					why = append(why, "TPOT "+r.TPOT.Times()+" baseline")
				}
				r.Reason = strings.Join(why, ", ")
			default:
				r.State = stateHealthy
			}
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b pairRow) int {
		if c := slices.Index(stateOrder, a.State) - slices.Index(stateOrder, b.State); c != 0 {
			return c
		}
		if c := strings.Compare(a.Target, b.Target); c != 0 {
			return c
		}
		return strings.Compare(a.Module, b.Module)
	})
	return rows
}

// HTML renders the row. It is written by hand rather than by html/template,
// whose reflection made / take about 100 ms at 2,000 rows; every text is
// escaped here (html.EscapeString), and links are built by url.Values. The
// </td> and </tr> end tags, which HTML makes optional (a cell ends at the next
// cell, a row at the next row or the table's end), are left out: 65 bytes a
// row, what keeps / under 1 MB when all 2,000 pairs of a fleet fail
// (BenchmarkLandingPageOutage).
func (r *pairRow) HTML() template.HTML {
	var b strings.Builder
	b.Grow(512)
	w := func(parts ...string) {
		for _, p := range parts {
			b.WriteString(p)
		}
	}
	e := html.EscapeString
	td := func(hot bool, text string) {
		if hot {
			w(`<td class="hot">`, e(text))
		} else {
			w("<td>", e(text))
		}
	}
	w(`<tr class="`, e(r.State), `"><td class="st">`, e(r.State), `<td><a href="`, e(r.Section), `">`, e(r.Target), "</a>")
	if r.PerModel {
		td(false, r.Module+" ("+r.Model+")")
	} else {
		td(false, r.Module)
	}
	spanned(w, r.ReasonSpan, r.ReasonCovered, "", r.Reason)
	td(false, r.Since)
	if r.Record != "" {
		w(`<td><a class="rec" href="`, e(r.Record), `">`, e(r.RecordAge), `</a>`)
	} else {
		w("<td>-")
	}
	td(r.Hour.Hot, r.Hour.Percent())
	td(r.Hist.Hot, r.Hist.Percent())
	td(r.TTFT.Hot, r.TTFT.Times())
	td(r.TPOT.Hot, r.TPOT.Times())
	scrape, class := r.Scrape, ""
	if scrape == "" {
		scrape = "-"
	}
	if r.ScrapeBad {
		class = "hot"
	}
	spanned(w, r.Span, r.Covered, class, scrape)
	spanned(w, r.Span, r.Covered, "", r.Labels)
	return template.HTML(b.String()) //nolint:gosec // every part is escaped above
}

// scrapeText is the collector's last scrape of target as the pages show it:
// up or down, when (UTC, and how long ago), how long it took and, when it
// failed, why (scrubbed, cut to errLen runes). "" when the target is not
// scraped or not yet.
func (h *handler) scrapeText(target string, now time.Time, errLen int) (text string, bad bool) {
	if h.scrapes == nil {
		return "", false
	}
	sc, ok := h.scrapes.LastScrape(target)
	if !ok {
		return "", false
	}
	state := "up"
	if !sc.Up {
		state = "down"
	}
	text = state + " at " + sc.At.UTC().Format("15:04:05Z") + " (" + fmtAgo(now.Sub(sc.At)) + " ago), took " + fmtScrapeDur(sc.Duration)
	if !sc.Up {
		text += ": " + terseErr(h.scrubber.scrub(sc.Err), errLen)
		if h.probesServe(target) {
			// vLLM's /metrics can fail while inference works (a
			// multiprocess directory on a network volume): say so.
			text += "; the engine itself serves: its last probes succeeded, only /metrics fails (server-side panels and saturation alerts are blind, VLLMMetricsScrapeFailing)"
		}
		return text, true
	}
	switch {
	case sc.Engine == collector.EngineUnknown:
		text += "; matches no engine profile, no engine signal read (families " + strings.Join(sc.FamiliesSeen, ", ") + ")"
		bad = true
	case sc.Engine != "":
		text += "; engine " + sc.Engine
	}
	if sc.SleepLevel > 0 {
		text += "; sleeping (level " + strconv.Itoa(sc.SleepLevel) + ")"
	}
	return text, bad
}

// recordURL links to a stored record; model picks the pair of a `models:`
// target and may be empty.
func recordURL(target, module, model string, id uint64) string {
	v := url.Values{"target": {target}, "module": {module}, "id": {strconv.FormatUint(id, 10)}}
	if model != "" {
		v.Set("model", model)
	}
	return "probe/record?" + v.Encode()
}

// labelText renders static labels as "k=v k=v", sorted by name.
func labelText(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}

// probesServe reports whether target's last probe of every module it probes
// succeeded: the engine answers generations, whatever its /metrics does.
func (h *handler) probesServe(target string) bool {
	if h.probes == nil {
		return false
	}
	st, ok := h.probes.TargetStatus(target)
	if !ok || len(st.Modules) == 0 {
		return false
	}
	for _, m := range st.Modules {
		if m.Last == nil || !m.Last.Success {
			return false
		}
	}
	return true
}
