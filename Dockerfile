# Multi-stage build of vllm_prober. The builder runs `make build` (plain go build
# with the version ldflags of github.com/prometheus/common/version); the final
# stage keeps the Prometheus exporters' shape: busybox, non-root, one binary,
# EXPOSE of the port, ENTRYPOINT = binary, CMD = default --config.file.
#
#   docker build -t vllm_prober .
#   docker build -t vllm_prober \
#     --build-arg VERSION="$(git describe --tags --always)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" .
#   docker run -p 10040:10040 -v "$PWD/my.yml:/etc/vllm_prober/config.yml:ro" vllm_prober
#
# Without a VERSION build arg the version is the VERSION file's. (`make docker`
# passes VERSION, REVISION and BRANCH and tags the image :VERSION and :latest.)

FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# An empty VERSION (no build arg) falls back to the VERSION file.
ARG VERSION=
ARG REVISION=unknown
ARG BRANCH=unknown
RUN make build BIN_DIR=/out VERSION="${VERSION:-$(cat VERSION)}" REVISION="${REVISION}" BRANCH="${BRANCH}" BUILD_USER=docker@builder

FROM quay.io/prometheus/busybox:latest
LABEL org.opencontainers.image.title="vllm_prober" \
      org.opencontainers.image.description="Probes vLLM endpoints with real streaming completions and exports Prometheus metrics" \
      org.opencontainers.image.source="https://github.com/vllm-prober/vllm_prober"
COPY --from=builder /out/vllm_prober /bin/vllm_prober
COPY --from=builder /out/vllm_sim    /bin/vllm_sim
COPY examples/demo.yml /etc/vllm_prober/config.yml
COPY examples/baselines /etc/vllm_prober/baselines
EXPOSE 10040
USER nobody
ENTRYPOINT ["/bin/vllm_prober"]
CMD ["--config.file=/etc/vllm_prober/config.yml"]
