package clierr

import (
	"errors"
	"fmt"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		name string
		e    Error
		want string
	}{
		{"one line", Error{File: "a.yml", Place: "--x", Err: errors.New("bad"), Fix: "do y."},
			"vllm_prober cmd: a.yml: --x: bad\n  What to do: do y.\n"},
		{"no fix, no file", Error{Err: errors.New("bad")}, "vllm_prober cmd: bad\n"},
		{"join", Error{Err: errors.Join(errors.New("a"), errors.New("b"))},
			"vllm_prober cmd: 2 problems:\n  - a\n  - b\n"},
		{"wrapped join", Error{Err: fmt.Errorf("invalid options: %w", errors.Join(errors.New("a"), errors.New("b"))), Fix: "f."},
			"vllm_prober cmd: invalid options:\n  - a\n  - b\n  What to do: f.\n"},
		{"lines", Error{File: "c.yml", Err: errors.New("yaml: unmarshal errors:\n  line 1: x\n  line 2: y")},
			"vllm_prober cmd: c.yml: yaml: unmarshal errors:\n  - line 1: x\n  - line 2: y\n"},
		{"List", Error{Err: List("p", "q")}, "vllm_prober cmd: 2 problems:\n  - p\n  - q\n"},
	} {
		if got := Format("cmd", c.e); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestFormatListOfOne(t *testing.T) {
	e := Error{Err: fmt.Errorf("invalid options: %w", errors.Join(errors.New("a")))}
	if got, want := Format("cmd", e), "vllm_prober cmd: invalid options: a\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
