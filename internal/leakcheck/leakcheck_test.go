package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func parked(started chan<- struct{}, stop <-chan struct{}) {
	close(started)
	<-stop
}

func TestWaitSeesAndForgetsAGoroutine(t *testing.T) {
	started, stop := make(chan struct{}), make(chan struct{})
	go parked(started, stop)
	<-started
	if got := Wait(50*time.Millisecond, "leakcheck.parked"); !strings.Contains(got, "leakcheck.parked") {
		t.Fatalf("a parked goroutine was not reported: %q", got)
	}
	close(stop)
	if got := Wait(5*time.Second, "leakcheck.parked"); got != "" {
		t.Fatalf("a stopped goroutine is still reported:\n%s", got)
	}
}
