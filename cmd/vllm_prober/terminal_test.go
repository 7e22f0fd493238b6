//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIsTerminal: the progress bar is drawn on a terminal (a pseudo-terminal
// here) and nowhere else: not on /dev/null (a character device too), a pipe,
// a file or a buffer.
func TestIsTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	if !isTerminal(pts) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, out := range map[string]io.Writer{"/dev/null": null, "a pipe": w, "a file": file, "a buffer": &bytes.Buffer{}} {
		if isTerminal(out) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
}
