package testtool

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	ctx, cancel := context.WithCancel(context.Background())
	l, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg(port)), 0o644); err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting haproxy: %v", err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
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

// HAProxyBalancer runs HAProxy as a load balancer in front of servers
// ("name host:port", in order): `option http-no-delay`, round robin, each
// response naming its server in X-Served-By. frontend holds extra lines of
// its frontend (before its default_backend) and backends extra sections.
// It returns the frontend's port on 127.0.0.1.
func HAProxyBalancer(t testing.TB, servers []string, frontend, backends string) int {
	t.Helper()
	return HAProxyBalancerGlobal(t, "", servers, frontend, backends)
}

// HAProxyBalancerGlobal is HAProxyBalancer with global holding the lines of
// a global section (e.g. lua-load), none when empty.
func HAProxyBalancerGlobal(t testing.TB, global string, servers []string, frontend, backends string) int {
	t.Helper()
	if global != "" {
		global = "global\n" + global
	}
	var list strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&list, "  server %s\n", s)
	}
	return HAProxy(t, func(port int) string {
		return global + fmt.Sprintf(`defaults
  mode http
  option http-no-delay
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend llm
  bind 127.0.0.1:%d
%s  default_backend vllm
backend vllm
  balance roundrobin
  http-response set-header X-Served-By %%s
%s%s`, port, frontend, list.String(), backends)
	})
}
