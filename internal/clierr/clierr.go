// Package clierr writes the errors of vllm_prober's commands (baseline
// import, bench, rules generate, check, --config.check) as plain text for a
// person on stderr: the file, the place in it, what is wrong and what to do.
// The daemon logs in logfmt; a command run by hand answers in sentences.
//
// One problem:
//
//	vllm_prober baseline import: report.md: no usable baseline: ...
//	  What to do: lower --min-success-ratio or ...
//
// Several problems (an errors.Join, or an error whose text has several
// lines, such as yaml's "unmarshal errors") are a list, one item per line:
//
//	vllm_prober --config.check: vllm_prober.yml: 2 problems:
//	  - line 3: field foo not found in type config.plain
//	  - line 9: ...
//	  What to do: ...
package clierr

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Error is one error of a command.
type Error struct {
	// File is the file the problem is in; "" when it is not about a file.
	File string
	// Place is where: a key path, a line, a flag; "" when unknown or when the
	// message says it.
	Place string
	// Err is what is wrong. A joined error or a text of several lines is
	// shown as a list.
	Err error
	// Fix says what to do, as a sentence; "" when there is nothing to add.
	Fix string
}

// Print writes e for command (e.g. "baseline import", "--config.check") to
// w. It ignores write errors: stderr is the last place to report them.
func Print(w io.Writer, command string, e Error) {
	_, _ = io.WriteString(w, Format(command, e))
}

// Format is the text Print writes, ending in a newline.
func Format(command string, e Error) string {
	var b strings.Builder
	b.WriteString("vllm_prober")
	if command != "" {
		b.WriteString(" " + command)
	}
	b.WriteString(": ")
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Place != "" {
		b.WriteString(e.Place + ": ")
	}
	head, items := Items(e.Err)
	if len(items) == 1 { // a list of one reads as a sentence
		if head != "" {
			head += ": "
		}
		head, items = head+items[0], nil
	}
	switch {
	case len(items) == 0:
		b.WriteString(head)
	case head == "":
		fmt.Fprintf(&b, "%d problems:", len(items))
	default:
		b.WriteString(head + ":")
	}
	b.WriteString("\n")
	for _, it := range items {
		b.WriteString("  - " + it + "\n")
	}
	if e.Fix != "" {
		b.WriteString("  What to do: " + e.Fix + "\n")
	}
	return b.String()
}

// Items splits err into a heading and a list: an errors.Join (at the top)
// gives no heading and one item per joined error, a text of several lines
// its first line (without a trailing colon) as the heading and one item per
// further line. A one-line error is a heading without items. Items are
// trimmed of indentation and of a leading "- " or "* ".
func Items(err error) (head string, items []string) {
	if err == nil {
		return "", nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok && isJoin(err) {
		for _, e := range j.Unwrap() {
			h, sub := Items(e)
			if h != "" {
				items = append(items, h)
			}
			items = append(items, sub...)
		}
		return "", items
	}
	// A wrapped join ("invalid options: %w" of errors.Join(a, b)): the
	// wrapping text is the heading, the joined errors the items.
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(interface{ Unwrap() []error }); !ok || !isJoin(e) {
			continue
		}
		if prefix, ok := strings.CutSuffix(err.Error(), e.Error()); ok && !strings.Contains(prefix, "\n") {
			_, items = Items(e)
			return strings.TrimSuffix(strings.TrimSpace(prefix), ":"), items
		}
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	head = strings.TrimSpace(lines[0])
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		l = strings.TrimPrefix(strings.TrimPrefix(l, "- "), "* ")
		if l != "" {
			items = append(items, l)
		}
	}
	if len(items) > 0 {
		head = strings.TrimSuffix(head, ":")
	}
	return head, items
}

// isJoin reports whether err is what errors.Join returns (its message is the
// joined messages, nothing around them).
func isJoin(err error) bool {
	j := err.(interface{ Unwrap() []error })
	msgs := make([]string, 0, len(j.Unwrap()))
	for _, e := range j.Unwrap() {
		msgs = append(msgs, e.Error())
	}
	return err.Error() == strings.Join(msgs, "\n")
}

// List is a multi-problem error: errors.Join of one error per text.
func List(problems ...string) error {
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = errors.New(p)
	}
	return errors.Join(errs...)
}
