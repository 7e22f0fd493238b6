#!/usr/bin/env bash
# demo.sh starts bin/vllm_sim on 127.0.0.1:8000 and bin/vllm_prober on
# 127.0.0.1:10040 probing it (examples/demo.yml), prints where to look and stops
# both on Ctrl-C. `make demo` builds the binaries first.
#
# Environment: SIM_ADDR (default 127.0.0.1:8000, where examples/demo.yml points;
# another address needs a CONFIG pointing there), PROBER_ADDR (default
# 127.0.0.1:10040), CONFIG (default examples/demo.yml), SIM_ARGS and PROBER_ARGS
# (extra flags), SGLANG_ADDR (default 127.0.0.1:8001: a second vllm_sim speaking
# SGLang's surface, --engine=sglang, which examples/demo.yml scrapes), DEMO_DURATION (stop by itself after that many seconds; default:
# run until interrupted).
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_ADDR=${SIM_ADDR:-127.0.0.1:8000}
SGLANG_ADDR=${SGLANG_ADDR:-127.0.0.1:8001}
PROBER_ADDR=${PROBER_ADDR:-127.0.0.1:10040}
CONFIG=${CONFIG:-examples/demo.yml}
DEMO_DURATION=${DEMO_DURATION:-}

for f in bin/vllm_sim bin/vllm_prober "$CONFIG"; do
	if [ ! -e "$f" ]; then
		echo "demo: $f is missing (run \`make demo\`, which builds the binaries)" >&2
		exit 1
	fi
done

pids=()
cleanup() {
	trap - EXIT INT TERM
	if [ "${#pids[@]}" -gt 0 ]; then
		echo
		echo ">> stopping vllm_prober and vllm_sim"
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# port_open HOST:PORT succeeds once something listens there (bash's /dev/tcp,
# so the demo needs no curl).
port_open() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

wait_for() { # wait_for NAME HOST:PORT PID
	for _ in $(seq 1 100); do
		if port_open "$2"; then return 0; fi
		if ! kill -0 "$3" 2>/dev/null; then
			echo "demo: $1 exited before listening on $2" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "demo: $1 is not listening on $2 after 10s" >&2
	return 1
}

for addr in "$SIM_ADDR" "$SGLANG_ADDR" "$PROBER_ADDR"; do
	if port_open "$addr"; then
		echo "demo: $addr is already in use (an earlier demo still running?)" >&2
		exit 1
	fi
done

# shellcheck disable=SC2086 # SIM_ARGS and PROBER_ARGS are word lists on purpose
bin/vllm_sim --web.listen-address="$SIM_ADDR" ${SIM_ARGS:-} &
pids+=($!)
wait_for vllm_sim "$SIM_ADDR" "${pids[0]}"

# The same simulator speaking SGLang's /metrics, errors and health: the
# collector reads it with its SGLang profile (vllm_server_info{engine="sglang"}).
bin/vllm_sim --engine=sglang --web.listen-address="$SGLANG_ADDR" --model=Qwen/Qwen2.5-1.5B-Instruct &
pids+=($!)
wait_for "vllm_sim --engine=sglang" "$SGLANG_ADDR" "${pids[1]}"

# shellcheck disable=SC2086
bin/vllm_prober --config.file="$CONFIG" --web.listen-address="$PROBER_ADDR" ${PROBER_ARGS:-} &
pids+=($!)
wait_for vllm_prober "$PROBER_ADDR" "${pids[2]}"

cat <<MSG

  vllm_sim     http://$SIM_ADDR/v1/models   (its vLLM metrics: http://$SIM_ADDR/metrics)
  vllm_sim     http://$SGLANG_ADDR/metrics     --engine=sglang: SGLang's metrics, read by the SGLang profile
  vllm_prober  http://$PROBER_ADDR/          landing page: targets, last probes
               http://$PROBER_ADDR/metrics   vllm_probe_* and vllm_server_* series

  The first probe results appear within one probe interval of $CONFIG.
  Press Ctrl-C to stop both.

MSG

if [ -n "$DEMO_DURATION" ]; then
	# Bounded run (used by tests and scripted demos): stop after DEMO_DURATION s
	# unless a process dies first.
	end=$((SECONDS + DEMO_DURATION))
	while [ "$SECONDS" -lt "$end" ]; do
		for p in "${pids[@]}"; do
			if ! kill -0 "$p" 2>/dev/null; then
				echo "demo: a process exited early" >&2
				exit 1
			fi
		done
		sleep 1
	done
	exit 0
fi

# Run until Ctrl-C, or until either process exits on its own.
set +e
wait -n "${pids[@]}"
rc=$?
echo "demo: a process exited with status $rc" >&2
exit "$rc"
