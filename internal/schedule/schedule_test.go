package schedule

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestPhaseSpreadsStably(t *testing.T) {
	const interval = 15 * time.Second
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		name := fmt.Sprintf("t%04d", i)
		p := Phase(interval, name, "m")
		if p < 0 || p >= interval || Phase(interval, name, "m") != p {
			t.Fatalf("Phase(%q) = %v: out of [0, %v) or unstable", name, p, interval)
		}
		seen[p/(interval/100)] = true
	}
	if len(seen) < 100 {
		t.Errorf("1,000 phases fell in %d of 100 slices of the interval", len(seen))
	}
	if Phase(0, "x") != 0 {
		t.Error("Phase of a zero interval")
	}
	if Phase(interval, "ab", "c") == Phase(interval, "a", "bc") {
		t.Error("parts are not separated")
	}
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, 10*time.Millisecond, time.Hour, true, func(context.Context) { n.Add(1) })
	}()
	time.Sleep(50 * time.Millisecond)
	if got := n.Load(); got != 1 {
		t.Errorf("%d calls before the phase, want the immediate one", got)
	}
	cancel()
	<-done

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	calls := make(chan time.Time, 10)
	go Run(ctx, 20*time.Millisecond, 0, false, func(context.Context) {
		select {
		case calls <- time.Now():
		default:
		}
	})
	first := <-calls
	second := <-calls
	if d := second.Sub(first); d < 15*time.Millisecond {
		t.Errorf("second call %v after the first, want an interval", d)
	}
}
