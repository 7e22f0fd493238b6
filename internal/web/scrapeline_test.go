package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/collector"
	"github.com/vllm-prober/vllm_prober/internal/redact"
	"github.com/vllm-prober/vllm_prober/internal/web"
)

// TestScrapeLineEngineAndSleep: the target page's scrape line names the
// engine, says when /metrics matched no profile (with a few of its
// families, marked bad) and when the engine sleeps.
func TestScrapeLineEngineAndSleep(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := now.Add(-2 * time.Second)
	d := web.NewPages(web.Options{Scrubber: redact.New(), Scrapes: fakeScrapes{
		"sg":    {At: at, Up: true, Engine: "sglang", SleepLevel: -1},
		"tgi":   {At: at, Up: true, Engine: collector.EngineUnknown, FamiliesSeen: []string{"tgi_queue_size", "tgi_batch_current_size"}, SleepLevel: -1},
		"sleep": {At: at, Up: true, Engine: "vllm", SleepLevel: 2},
	}})
	for _, tc := range []struct {
		target, want string
		bad          bool
	}{
		{"sg", "; engine sglang", false},
		{"tgi", "; matches no engine profile, no engine signal read (families tgi_queue_size, tgi_batch_current_size)", true},
		{"sleep", "; engine vllm; sleeping (level 2)", false},
	} {
		text, bad := d.ScrapeText(tc.target, now, 80)
		if !strings.HasSuffix(text, tc.want) || bad != tc.bad {
			t.Errorf("%s: %q (bad %v), want it to end with %q (bad %v)", tc.target, text, bad, tc.want, tc.bad)
		}
	}
}
