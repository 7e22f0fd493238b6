package simulator

import (
	"net/http"
	"strconv"
)

// vLLM's sleep mode (vllm/entrypoints/openai/api_server.py, dev mode):
// POST /sleep?level=1 offloads the weights, level=2 discards them and the
// KV cache; POST /wake_up wakes the engine; GET /is_sleeping answers
// {"is_sleeping": bool}. vllm:engine_sleep_state follows. A sleeping
// simulator answers generation requests with 503, its error body saying
// the engine sleeps; /health stays 200: the process is alive.

// sleepLevel is 0 when awake, else the level the engine sleeps at.
func (s *Simulator) sleepLevel() int { return int(s.sleeping.Load()) }

func (s *Simulator) handleSleep(w http.ResponseWriter, r *http.Request) {
	level := 1
	if v := r.URL.Query().Get("level"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 1 && n != 2) {
			s.writeError(w, http.StatusBadRequest, "level must be 1 or 2", strPtr("level"))
			return
		}
		level = n
	}
	s.sleeping.Store(int32(level))
	w.WriteHeader(http.StatusOK)
}

func (s *Simulator) handleWakeUp(w http.ResponseWriter, r *http.Request) {
	s.sleeping.Store(0)
	w.WriteHeader(http.StatusOK)
}

func (s *Simulator) handleIsSleeping(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"is_sleeping": s.sleepLevel() > 0})
}

// sleepStates are the sleep_state values of vllm:engine_sleep_state in
// order, with the level each stands for.
var sleepStates = []struct {
	name  string
	level int
}{{"awake", 0}, {"weights_offloaded", 1}, {"discard_all", 2}}

// sleepStateValue is vllm:engine_sleep_state{sleep_state=state} at level.
func sleepStateValue(stateLevel, level int) float64 {
	if stateLevel == level {
		return 1
	}
	return 0
}
