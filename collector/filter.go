package collector

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
)

// vllmFamilies are the families vLLM's rules (normaliseVLLM) read, under
// every naming era; engines that re-export them under another prefix are
// read through the same list (Profile.VLLMPrefixes).
var vllmFamilies = map[string]bool{
	mRunning: true, mWaiting: true, mWaitingByReason: true, mSwapped: true,
	mKVUsage: true, mGPUCacheUsage: true, mCPUCacheUsage: true,
	mPromptTokens: true, mGenTokens: true, mPreemptions: true,
	mPrefixQueries: true, mPrefixHits: true, mGPUPrefixQ: true, mGPUPrefixH: true,
	mRequestSuccess: true, mTTFT: true, mITL: true, mTPOTOld: true, mE2E: true,
	mQueue: true, mReqGenTokens: true, mCacheConfig: true,
	mGPUPrefixHitRate: true, mCPUPrefixHitRate: true, mPrefill: true,
	mSleepState: true, mSpecDrafts: true, mSpecDraftTokens: true, mSpecAccepted: true,
}

// readFamilies are the metric families normalise reads: those of every
// engine profile (Profile.Families). Text and OpenMetrics bodies are filtered down to them before they are
// decoded: a vLLM server exposes ~350 samples, two thirds of them in families
// the collector never looks at (prefill, decode, inference-time, iteration and
// request-parameter histograms, _created samples, process and Python
// metrics), and decoding those into client_model structures was most of the
// collector's CPU time (docs/performance.md, P2). A name normalise reads must
// be listed here: TestFamilyFilterSameSnapshot compares filtered and whole
// decodes of every fixture and fails otherwise.
var readFamilies = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range profiles {
		for _, f := range p.Families() {
			m[f] = true
		}
	}
	return m
}()

// wantedNames holds every name a wanted line can carry: the families of
// readFamilies, their histogram and summary sample names, and the names
// OpenMetrics metadata gives counter and info families (without the _total
// or _info their samples carry). _created samples are never wanted:
// normalise does not read them.
var wantedNames = func() map[string]bool {
	m := map[string]bool{}
	for name := range readFamilies {
		m[name] = true
		for _, suffix := range [...]string{"_bucket", "_sum", "_count"} {
			m[name+suffix] = true
		}
		for _, suffix := range [...]string{"_total", "_info"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				m[base] = true
			}
		}
	}
	return m
}()

// wanted reports whether a sample or metadata line named name belongs to a
// family in readFamilies. The lookup does not allocate.
func wanted(name []byte) bool { return wantedNames[string(name)] }

// errMalformedLine is wrapped by familyFilter for a line that is not an
// exposition line at all (an HTML error page, say).
var errMalformedLine = errors.New("not a metric, comment or blank line")

// familyFilter reads a text or OpenMetrics exposition and passes on only the
// lines of the wanted families, plus comments other than HELP and TYPE (the
// OpenMetrics "# EOF" among them). Passed lines are decoded in full by
// expfmt; every dropped line is still checked to be blank, a comment or to
// start with a metric name, so that a body that is not an exposition (an HTML
// error page, say) is rejected whatever families it would have held. A
// malformed value or label set in a family that is never read goes
// unnoticed, as it changes nothing the collector reports.
//
// It remembers the number of every line passed on so that expfmt's parse
// errors can name the line of the original body.
type familyFilter struct {
	r       *bufio.Reader
	pending []byte // the rest of a passed line not yet returned
	cont    bool   // the previous slice ended without a newline
	keep    bool   // decision for the line being continued
	line    int    // lines read so far
	lines   []int  // lines[i] is the body line of the i+1-th passed line
	err     error
	// seen names the first maxFamiliesSeen distinct families of the body's
	// samples, for the warning about a payload no profile reads.
	seen  []string
	typed bool // a # TYPE line was seen: families are named by those
}

func newFamilyFilter(r io.Reader) *familyFilter {
	return &familyFilter{r: bufio.NewReaderSize(r, 4<<10)}
}

func (f *familyFilter) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(f.pending) > 0 {
			c := copy(p[n:], f.pending)
			f.pending = f.pending[c:]
			n += c
			continue
		}
		if f.err != nil {
			break
		}
		s, err := f.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			f.err = err
		}
		if len(s) == 0 {
			continue
		}
		if !f.cont {
			f.line++
			if len(f.seen) < maxFamiliesSeen {
				f.noteSeen(s)
			}
			keep, lerr := classify(s)
			if lerr != nil {
				f.err = fmt.Errorf("line %d: %w", f.line, lerr)
				f.pending = nil
				break
			}
			f.keep = keep
			if keep {
				f.lines = append(f.lines, f.line)
			}
		}
		f.cont = errors.Is(err, bufio.ErrBufferFull)
		if f.keep {
			f.pending = s
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, f.err
}

// noteSeen records the family a "# TYPE" line of s declares, or, in a body
// without metadata, the name of the sample line s, when it is a new one.
func (f *familyFilter) noteSeen(s []byte) {
	if rest, ok := bytes.CutPrefix(s, []byte("# TYPE ")); ok {
		f.typed = true
		s = rest
	} else if f.typed || len(s) == 0 || s[0] == '#' {
		return
	}
	n := 0
	for n < len(s) && isNameByte(s[n], n == 0) {
		n++
	}
	if n == 0 || slices.Contains(f.seen, string(s[:n])) {
		return // a blank, a quoted name, or one already seen
	}
	f.seen = append(f.seen, string(s[:n]))
}

// bodyLine maps a line number of the filtered stream to the body's.
func (f *familyFilter) bodyLine(filtered int) int {
	if filtered >= 1 && filtered <= len(f.lines) {
		return f.lines[filtered-1]
	}
	return f.line
}

// remap rewrites an expfmt parse error to name the body's line.
func (f *familyFilter) remap(err error) error {
	var pe expfmt.ParseError // the text parser returns it by value
	if errors.As(err, &pe) {
		pe.Line = f.bodyLine(pe.Line)
		return pe
	}
	return err
}

// classify decides whether the line starting at s (possibly only its first
// bytes, for a very long line) is passed on.
func classify(s []byte) (bool, error) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	s = s[i:]
	if len(s) == 0 || s[0] == '\n' || s[0] == '\r' {
		return false, nil
	}
	switch s[0] {
	case '#':
		// "# HELP name ..." / "# TYPE name ...": the family's metadata.
		rest := trimBlank(s[1:])
		kw, rest := token(rest)
		if string(kw) != "HELP" && string(kw) != "TYPE" {
			return true, nil // another comment; # EOF must reach the decoder
		}
		name, _ := token(trimBlank(rest))
		if len(name) > 0 && name[0] == '"' {
			return true, nil // a quoted UTF-8 name: let the decoder judge
		}
		if !isMetricName(name) {
			return true, nil // malformed: the decoder reports it
		}
		return wanted(name), nil
	case '{':
		return true, nil // a quoted UTF-8 name inside the braces
	}
	n := 0
	for n < len(s) && isNameByte(s[n], n == 0) {
		n++
	}
	if n == 0 {
		return false, fmt.Errorf("%w: starts with %q", errMalformedLine, s[0])
	}
	// What follows the name is not checked: expfmt itself accepts a value
	// right after the name ("x+1"), and the filter must never reject what
	// the decoder would accept.
	return wanted(s[:n]), nil
}

func trimBlank(s []byte) []byte {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	return s
}

// token splits off the leading run of non-blank bytes.
func token(s []byte) (tok, rest []byte) {
	i := 0
	for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
		i++
	}
	return s[:i], s[i:]
}

func isNameByte(b byte, first bool) bool {
	return b == '_' || b == ':' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (!first && b >= '0' && b <= '9')
}

func isMetricName(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for i, b := range s {
		if !isNameByte(b, i == 0) {
			return false
		}
	}
	return true
}
