package testtool

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// HAProxy runs Debian's haproxy with the configuration cfg makes for a free
// port on 127.0.0.1 (its frontend's bind port), until the test ends, and
// returns the port once haproxy accepts connections on it. The test is
// skipped (and the skip listed) when haproxy is missing.
func HAProxy(t testing.TB, cfg func(port int) string) int {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		Skip(t, "haproxy", "apt-get install haproxy")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg(port)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting haproxy: %v", err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %d: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
