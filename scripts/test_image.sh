#!/usr/bin/env bash
# test_image.sh IMAGE [PORT] starts the container image and polls its /metrics
# until vllm_prober_build_info appears (the node_exporter test_image.sh habit).
# Needs a Docker engine; CI has none and tests the same binary instead
# (deploy/dockerfile_test.go).
set -euo pipefail
image=${1:?usage: test_image.sh IMAGE [PORT]}
port=${2:-10040}
name=vllm_prober_test_$$

docker run -d --rm --name "$name" -p "127.0.0.1:$port:10040" "$image" >/dev/null
trap 'docker rm -f "$name" >/dev/null 2>&1 || true' EXIT

for _ in $(seq 1 30); do
	if curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null | grep -q '^vllm_prober_build_info'; then
		echo "test_image: $image serves /metrics on :$port"
		exit 0
	fi
	sleep 1
done
echo "test_image: $image did not serve /metrics on :$port within 30s" >&2
docker logs "$name" >&2 || true
exit 1
