package web

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

func fmtSecondsMs(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmtDur(time.Duration(v * float64(time.Second)))
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// fmtDur renders a duration in milliseconds with microsecond resolution, "-" for 0.
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

func fmtSecs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + "s"
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// fmtScrapeDur renders a scrape's duration: 12.3ms, 1.50s.
func fmtScrapeDur(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// summaryErrLen is how many runes of an error a summary row shows; the
// target's page and the stored record show more.
const summaryErrLen = 72

// urlErrPrefix matches the `Get "http://…": ` that Go's net/http puts before a
// request's error (url.Error): the URL is the target's, on its page.
var urlErrPrefix = regexp.MustCompile(`\b(Get|Post|Head|Put|Delete|Patch|Options) "[^"]*": `)

// terseErr is an error as a summary shows it: without the request URLs that
// Go's net/http quotes (the target's URL is on its page), cut to at most n
// runes keeping its beginning and its end, where the cause is ("dial tcp
// 10.0.0.7:8000: connect: connection refused").
func terseErr(s string, n int) string {
	s = urlErrPrefix.ReplaceAllString(s, "")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := n / 2
	return string(r[:head]) + "…" + string(r[len(r)-(n-head-1):])
}

// fmtAgo renders a duration as an on-call reads it: 12s, 11m, 3h5m, 2d3h.
func fmtAgo(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 24*time.Hour:
		h := int(d.Hours())
		return fmt.Sprintf("%dh%dm", h, int(d.Minutes())-60*h)
	}
	days := int(d.Hours()) / 24
	return fmt.Sprintf("%dd%dh", days, int(d.Hours())-24*days)
}
