# Makefile for vllm_prober. Target names follow the Prometheus Makefile.common
# habits (build, test, lint, ...) without promu: plain `go build` with the same
# version ldflags.
#
#   make build    both binaries into bin/
#   make test     check + go test -race + promtool rules checks + chart tests
#   make lint     check + golangci-lint + govulncheck (slower; not part of test)
#   make demo     vllm_sim and vllm_prober on 127.0.0.1, pointing at each other
#   make e2e      the slow end-to-end tests on Prometheus 3.x, a kube-apiserver, llama.cpp's llama-server and Ollama (built once, cached)
#
# Every tool `make test` needs is installed when missing: staticcheck (and helm,
# best effort) with `go install`; promtool and prometheus (the end-to-end tests
# run a real Prometheus), chromium (the real-browser tests), and gcc with
# libc6-dev for `go test -race` (which needs cgo), haproxy (the gateway tests)
# and prometheus-alertmanager (Alertmanager and amtool: the vantage and inhibit
# tests), with apt-get when running as root. A test skipped because a tool is
# missing is listed at the end.

GO       ?= go
GOOS     ?= $(shell $(GO) env GOOS)
GOARCH   ?= $(shell $(GO) env GOARCH)
GOBIN    := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)
export PATH := $(GOBIN):$(PATH)

BIN_DIR  ?= bin
BINARIES := vllm_prober vllm_sim

STATICCHECK_VERSION ?= v0.7.0
STATICCHECK         ?= $(GOBIN)/staticcheck
# golangci-lint and govulncheck install from the Go module proxy on first use
# (golangci-lint builds for several minutes). govulncheck needs its database,
# GOVULNCHECK_DB (vuln.go.dev); offline, `make lint` says it skipped it.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT         ?= $(GOBIN)/golangci-lint
GOVULNCHECK_VERSION   ?= v1.9.0
GOVULNCHECK           ?= $(GOBIN)/govulncheck
GOVULNCHECK_DB        ?= https://vuln.go.dev
HELM_VERSION        ?= v3.17.3
PROMTOOL            ?= promtool

GO_TEST_TIMEOUT ?= 15m
GO_TEST_FLAGS   ?= -race -count=1 -timeout $(GO_TEST_TIMEOUT)
FUZZTIME        ?= 20000x
BENCH_COUNT     ?= 1
BENCH_PKGS      ?= ./...
# Figure-printing programs run by `make bench`: every main package under ./perf/.
# The figure programs of docs/performance.md (P1-P4); the soak has its own target.
BENCH_PROGRAMS  ?= $(shell $(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./perf/... 2>/dev/null | grep -v /perf/soak)
SOAK_DURATION   ?= 30m

# Every file of alerts/ is a loadable rule file (`rule_files: [alerts/*.yml]`
# works); the generator's input, mixin/slo.yml, lives outside it.
RULE_FILES       := $(wildcard alerts/*.yml)
RULE_TEST_FILES  := $(wildcard alerts/tests/*.yml)
DASHBOARD_FILES  := $(wildcard dashboards/*.json)
CHART_DIR        := deploy/helm/vllm-prober
CHART_FILES_DIR  := $(CHART_DIR)/files

# Version information, through github.com/prometheus/common/version.
# Each is evaluated once; any of them may be given on the command line or in
# the environment (the Dockerfile passes them as build args).
VERSION    ?= $(shell cat VERSION 2>/dev/null || git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH     ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILD_USER ?= $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)
VERSION    := $(VERSION)
REVISION   := $(REVISION)
BRANCH     := $(BRANCH)
BUILD_USER := $(BUILD_USER)
BUILD_DATE := $(BUILD_DATE)

VERSION_PKG := github.com/prometheus/common/version
LDFLAGS := -s -w \
	-X $(VERSION_PKG).Version=$(VERSION) \
	-X $(VERSION_PKG).Revision=$(REVISION) \
	-X $(VERSION_PKG).Branch=$(BRANCH) \
	-X $(VERSION_PKG).BuildUser=$(BUILD_USER) \
	-X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

DOCKER_IMAGE_NAME ?= vllm_prober
DOCKER_IMAGE_TAG  ?= $(subst /,-,$(VERSION))

.PHONY: all
all: build test

.PHONY: build
build: $(addprefix $(BIN_DIR)/,$(BINARIES))

# Always rebuilt: go's build cache makes this cheap and keeps the ldflags fresh.
.PHONY: $(addprefix $(BIN_DIR)/,$(BINARIES))
$(addprefix $(BIN_DIR)/,$(BINARIES)): $(BIN_DIR)/%:
	@mkdir -p $(BIN_DIR)
	CGO_ENABLED=0 GOOS=$(GOOS) GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/$*

.PHONY: print-ldflags
print-ldflags:
	@echo '$(LDFLAGS)'

.PHONY: test
# go test runs last so that its summary closes the output (CI reads it).
test: check test-rules test-go

# A test skipped because a tool is missing (chromium, helm, promtool) appends a
# line to $(SKIP_LOG) (internal/testtool); they are printed after go test's
# output, so that a skip is never silent.
SKIP_LOG ?= $(CURDIR)/.build/skipped-tests.txt

.PHONY: test-go
test-go: tools-test
	@mkdir -p $(dir $(SKIP_LOG)) && rm -f $(SKIP_LOG)
	@VLLM_PROBER_SKIP_LOG=$(SKIP_LOG) $(GO) test $(GO_TEST_FLAGS) ./...; rc=$$?; \
	if [ -s $(SKIP_LOG) ]; then \
		echo "!! $$(wc -l < $(SKIP_LOG)) test(s) skipped for a missing tool:" >&2; \
		sort $(SKIP_LOG) | sed 's/^/!!   /' >&2; \
	else \
		echo ">> no test skipped for a missing tool"; \
	fi; \
	exit $$rc

.PHONY: test-rules
test-rules: promtool
ifneq ($(RULE_FILES),)
	$(PROMTOOL) check rules $(RULE_FILES)
else
	@echo ">> no rule files in alerts/ yet"
endif
ifneq ($(RULE_TEST_FILES),)
	$(PROMTOOL) test rules $(RULE_TEST_FILES)
else
	@echo ">> no rule tests in alerts/tests/ yet"
endif

# The chart tests are the Go package ./deploy, part of `go test ./...`; this
# target runs them alone, verbosely.
.PHONY: test-chart
test-chart: tools-test
	$(GO) test -count=1 -v ./deploy/...

# Short runs of every Go fuzz target (func FuzzXxx) in the module.
.PHONY: fuzz
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) reliability/fuzz.sh

# check is what make test runs: fast and stable.
.PHONY: check
check: staticcheck
	@echo ">> checking gofmt"
	@out="$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*' -not -path './.build/*'))"; \
	if [ -n "$$out" ]; then echo "gofmt needs to be run on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# lint adds golangci-lint (.golangci.yml) and govulncheck to check.
.PHONY: lint
lint: check golangci-lint govulncheck
	$(GOLANGCI_LINT) run ./...
	@echo ">> govulncheck"; \
	out="$$($(GOVULNCHECK) -db $(GOVULNCHECK_DB) ./... 2>&1)"; rc=$$?; \
	if [ $$rc -ne 0 ] && printf '%s' "$$out" | grep -q 'fetching vulnerabilities'; then \
		echo "!! govulncheck skipped: its database $(GOVULNCHECK_DB) is unreachable:" >&2; \
		printf '%s\n' "$$out" | tail -1 >&2; \
	else \
		printf '%s\n' "$$out"; exit $$rc; \
	fi

# Tools. Each is installed only when missing.
.PHONY: staticcheck
staticcheck:
	@if [ ! -x "$(STATICCHECK)" ]; then \
		echo ">> installing staticcheck $(STATICCHECK_VERSION)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

.PHONY: golangci-lint
golangci-lint:
	@if [ ! -x "$(GOLANGCI_LINT)" ]; then \
		echo ">> installing golangci-lint $(GOLANGCI_LINT_VERSION) (builds for several minutes, once)"; \
		$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi

.PHONY: govulncheck
govulncheck:
	@if [ ! -x "$(GOVULNCHECK)" ]; then \
		echo ">> installing govulncheck $(GOVULNCHECK_VERSION)"; \
		$(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION); \
	fi

# promtool checks the rules; the end-to-end tests (e2e/) run a real Prometheus
# server ($$PROMETHEUS or prometheus on PATH). Debian's prometheus package has both.
.PHONY: promtool
promtool:
	@if ! command -v $(PROMTOOL) >/dev/null 2>&1 || { [ -z "$$PROMETHEUS" ] && ! command -v prometheus >/dev/null 2>&1; }; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo ">> installing promtool and prometheus (Debian package prometheus)"; \
			DEBIAN_FRONTEND=noninteractive scripts/apt-install.sh prometheus; \
		else \
			echo "promtool or prometheus is missing: install the Prometheus package (Debian: apt-get install prometheus)" >&2; exit 1; \
		fi; \
	fi

# go test -race needs cgo, hence a C compiler and the C library headers.
.PHONY: cc
cc:
	@if ! command -v gcc >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo ">> installing gcc and libc6-dev for go test -race"; \
			DEBIAN_FRONTEND=noninteractive scripts/apt-install.sh gcc libc6-dev; \
		else \
			echo "gcc is missing: go test -race needs cgo (Debian: apt-get install gcc libc6-dev)" >&2; exit 1; \
		fi; \
	fi

# helm is optional: the chart tests render the chart with helm when it is on
# PATH and otherwise with their own renderer of the chart's template subset.
.PHONY: helm
helm:
	@if ! command -v helm >/dev/null 2>&1; then \
		echo ">> installing helm $(HELM_VERSION) with go install (takes a few minutes once)"; \
		$(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) || \
			echo "!! helm could not be installed: chart tests use the built-in renderer" >&2; \
	fi

# chromium drives the real-browser tests (chromedp, /usr/bin/chromium): installed
# as root like prometheus; otherwise those tests are skipped, and listed at the end.
.PHONY: chromium
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo ">> installing chromium for the real-browser tests (Debian package chromium)"; \
			DEBIAN_FRONTEND=noninteractive scripts/apt-install.sh chromium; \
		else \
			echo "!! /usr/bin/chromium is missing and cannot be installed (not root): the real-browser tests will be skipped (apt-get install chromium)" >&2; \
		fi; \
	fi

# haproxy is a real gateway in front of streaming backends (prober/probe's
# HAProxy test: shedding and queue timeouts): installed as root like chromium;
# otherwise that test is skipped, and listed at the end.
.PHONY: haproxy
haproxy:
	@if ! command -v haproxy >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo ">> installing haproxy for the gateway tests (Debian package haproxy)"; \
			DEBIAN_FRONTEND=noninteractive scripts/apt-install.sh haproxy; \
		else \
			echo "!! haproxy is missing and cannot be installed (not root): the gateway tests will be skipped (apt-get install haproxy)" >&2; \
		fi; \
	fi

# Alertmanager and amtool: the vantage proof (e2e/vantages_test.go, which make
# e2e requires) sends its alerts to a real Alertmanager, and the inhibit example
# of docs/runbook.md is checked with amtool (mixin/inhibit_test.go). Debian's
# prometheus-alertmanager installs both (the server as prometheus-alertmanager);
# installed as root like haproxy, otherwise those tests are skipped (make test)
# or fail saying what to install (make e2e).
.PHONY: alertmanager
alertmanager:
	@if ! command -v amtool >/dev/null 2>&1 || { ! command -v alertmanager >/dev/null 2>&1 && ! command -v prometheus-alertmanager >/dev/null 2>&1; }; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo ">> installing Alertmanager and amtool for the vantage and inhibit tests (Debian package prometheus-alertmanager)"; \
			DEBIAN_FRONTEND=noninteractive scripts/apt-install.sh prometheus-alertmanager; \
		else \
			echo "!! alertmanager or amtool is missing and cannot be installed (not root): the inhibit test will be skipped and make e2e's vantage test fails (apt-get install prometheus-alertmanager)" >&2; \
		fi; \
	fi

# Ollama's build (scripts/e2e-tools.sh ollama) needs nlohmann/json.hpp and
# stb/stb_image.h, which the github.com/ollama/ollama module zip leaves out:
# Debian's nlohmann-json3-dev and libstb-dev, installed as root like haproxy;
# otherwise the build fails saying what to install.
.PHONY: ollama-deps
ollama-deps:
	@if [ ! -f /usr/include/nlohmann/json.hpp ] || [ ! -f /usr/include/stb/stb_image.h ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo ">> installing nlohmann-json3-dev and libstb-dev for Ollama's build"; \
			DEBIAN_FRONTEND=noninteractive scripts/apt-install.sh nlohmann-json3-dev libstb-dev; \
		else \
			echo "!! nlohmann-json3-dev or libstb-dev is missing and cannot be installed (not root): scripts/e2e-tools.sh ollama will fail (apt-get install nlohmann-json3-dev libstb-dev)" >&2; \
		fi; \
	fi

.PHONY: tools-test
tools-test: promtool helm cc chromium haproxy alertmanager

# Copy the rule files and dashboards into the chart, where .Files.Get can see
# them. deploy/chart_test.go fails when the copies are stale.
.PHONY: chart-sync
chart-sync:
	scripts/chart-sync.sh $(CHART_FILES_DIR)

# Regenerate alerts/ from mixin/slo.yml (and the SLO specs of alerts/slo/ for
# Pyrra, Sloth and OpenSLO) and dashboards/ from mixin/dashboards.go, then the
# chart's copies.
.PHONY: rules
rules:
	$(GO) run ./cmd/vllm_prober rules generate --slo.file mixin/slo.yml --out alerts/
	$(GO) test -count=1 -run '^(TestDashboardsUpToDate|TestSLOSpecsUpToDate|TestJsonnetMixinUpToDate)$$' ./mixin/ -update
	$(MAKE) chart-sync

# make e2e: the slow end-to-end tests, against real components that
# scripts/e2e-tools.sh builds once and caches (Prometheus 3.x today). Each tool
# in E2E_TOOLS is built (or found in the cache) first and its directory exported
# as E2E_<TOOL>_DIR (E2E_PROMETHEUS3_DIR, E2E_SLOTH_DIR, E2E_PINT_DIR, E2E_KUBERNETES_DIR,
# E2E_ETCD_DIR, E2E_ARGO_ROLLOUTS_DIR, E2E_EPP_DIR, E2E_LLAMA_SERVER_DIR, E2E_OLLAMA_DIR); then go test runs E2E_PKGS with VLLM_PROBER_E2E=1.
# Tests that need a tool skip in `make test` (saying so) and run here. To add
# end-to-end tests, append to the lists:
#   E2E_TOOLS += kubernetes etcd
#   E2E_PKGS  += ./internal/discovery/...
E2E_TOOLS   := prometheus3 sloth pint
E2E_PKGS    := ./e2e/... ./mixin/...
# The Argo Rollouts analysis controller on a real Kubernetes API server
# (e2e/rollouts_test.go).
E2E_TOOLS   += kubernetes etcd argo-rollouts
# The inference extension's Endpoint Picker v1.5.0 on that API server, behind
# the test's own ext_proc data plane (e2e/epp_test.go).
E2E_TOOLS   += epp
# llama.cpp's llama-server, a real engine, serving models internal/gguf writes
# (e2e/llamacpp_test.go); built from the llama.cpp source of node-llama-cpp on npm.
E2E_TOOLS   += llama-server
# Ollama, the second real engine (e2e/ollama_test.go): no /metrics, no /health;
# built with cgo from the Go module proxy (needs the headers of ollama-deps).
E2E_TOOLS   += ollama
E2E_RUN     ?= .
E2E_TIMEOUT ?= 60m

.PHONY: e2e
e2e: tools-test ollama-deps
	@start=$$(date +%s); set -e; \
	tools="$$(scripts/e2e-tools.sh $(E2E_TOOLS))"; echo "$$tools"; \
	eval "$$(printf '%s\n' "$$tools" | awk '{ n = toupper($$1); gsub("-", "_", n); printf "export E2E_%s_DIR=%s\n", n, $$2 }')"; \
	VLLM_PROBER_E2E=1 $(GO) test -race -count=1 -timeout $(E2E_TIMEOUT) -run '$(E2E_RUN)' $(E2E_PKGS); \
	echo ">> make e2e took $$(( $$(date +%s) - start ))s"

.PHONY: demo
demo: build
	scripts/demo.sh

.PHONY: bench
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=$(BENCH_COUNT) $(BENCH_PKGS)
	@set -e; for p in $(BENCH_PROGRAMS); do echo ">> $$p"; $(GO) run $$p; done
	@echo ">> P2 as a sharded fleet: the same 1,000 targets over 12 replicas"
	$(GO) run ./perf/footprint -shards 12
	@echo ">> P2 with baselines: the /metrics render with every target baselined vs without, at 100, 300 and 1,000 targets"
	$(GO) run ./perf/footprint -baselines

.PHONY: soak
soak: build
	$(GO) run ./perf/soak -duration $(SOAK_DURATION)

.PHONY: docker
docker:
	docker build -t "$(DOCKER_IMAGE_NAME):$(DOCKER_IMAGE_TAG)" -t "$(DOCKER_IMAGE_NAME):latest" \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
		--build-arg BRANCH=$(BRANCH) .

.PHONY: clean
clean:
	rm -rf $(BIN_DIR) .build
