package perfutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// TraceEvent is one line of a vllm_sim trace file (simulator.Config.TraceFile).
type TraceEvent struct {
	RequestID string `json:"request_id"`
	Kind      string `json:"kind"`
	Token     int    `json:"token"`
	Time      int64  `json:"time_unix_nano"`
}

// ReadTrace calls fn with every event of a simulator's trace file, in file order.
func ReadTrace(path string, fn func(TraceEvent)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading the trace: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e TraceEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("parsing the trace: %w", err)
		}
		fn(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the trace: %w", err)
	}
	return nil
}
