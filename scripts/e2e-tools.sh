#!/usr/bin/env bash
# e2e-tools.sh TOOL... builds the real components that `make e2e` runs against,
# from the Go module proxy, and caches each by version outside the clone:
#
#   prometheus3     Prometheus 3.x server and promtool (github.com/prometheus/prometheus)
#   kubernetes      kube-apiserver and kubectl (k8s.io/kubernetes)
#   etcd            etcd (go.etcd.io/etcd/server/v3)
#   argo-rollouts   the Argo Rollouts controller and its CRDs (github.com/argoproj/argo-rollouts)
#   sloth           the Sloth SLO generator CLI (github.com/slok/sloth; plain go install)
#   pint            Cloudflare's Prometheus rule linter (github.com/cloudflare/pint; its
#                   module list is refused by the proxy, so go install fails: built from the zip)
#   epp             the Gateway API Inference Extension Endpoint Picker and its CRDs
#                   (sigs.k8s.io/gateway-api-inference-extension cmd/epp; exact version only)
#   llama-server    llama.cpp's OpenAI-compatible server, CPU only, from the llama.cpp
#                   source that the npm package node-llama-cpp ships (needs npm, cmake, g++)
#   ollama          Ollama's server and CLI, CPU only, with cgo (github.com/ollama/ollama;
#                   needs g++ and Debian's nlohmann-json3-dev and libstb-dev)
#   all             every one of them
#
# None of the Go tools can be had with `go install` (their go.mod files carry replace
# directives), and Debian ships none of them (Debian's prometheus is 2.42), so each
# is built as the main module from the proxy's source zip. Cold, on a 2-core machine:
# Prometheus about 4 minutes, kube-apiserver about 5, etcd about 30 s, Argo Rollouts
# about 3.5, llama-server 7-14 (cmake and g++), Ollama about 6 (cgo); warm (cached
# binary) nothing at all.
#
# Cache: ${VLLM_PROBER_TOOLS:-$HOME/.cache/vllm_prober/tools}/NAME-VERSION/, holding the
# binaries (and, for Argo Rollouts, its crds/). The script prints one line per tool:
#   NAME DIR
# and `e2e-tools.sh --dir TOOL` prints only the directory (for scripts and tests).
# Either form builds what is missing first; concurrent callers wait for one build
# (flock on NAME-VERSION.lock).
# Nothing it builds is ever written into the repository.
set -euo pipefail

PROMETHEUS3_VERSION=${PROMETHEUS3_VERSION:-v0.315.0} # Prometheus 3.15.0
KUBERNETES_VERSION=${KUBERNETES_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
ARGO_ROLLOUTS_VERSION=${ARGO_ROLLOUTS_VERSION:-v1.10.2}
SLOTH_VERSION=${SLOTH_VERSION:-v0.16.0}
PINT_VERSION=${PINT_VERSION:-v0.87.0}
# v1.6.0 dropped cmd/epp (it moved to llm-d-router, which the proxy refuses).
EPP_VERSION=${EPP_VERSION:-v1.5.0}
# node-llama-cpp 3.21.1 carries llama.cpp release v0.4.0 (commit 80fb11a) as a git
# bundle; its npm integrity is checked before the tarball is unpacked.
LLAMA_SERVER_NPM_VERSION=${LLAMA_SERVER_NPM_VERSION:-3.21.1}
LLAMA_SERVER_NPM_INTEGRITY=${LLAMA_SERVER_NPM_INTEGRITY:-sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==}
# Ollama: the module's own version; the proxy lists v0.6.5 to v0.17.4.
OLLAMA_VERSION=${OLLAMA_VERSION:-v0.17.4}
# Argo Rollouts v1.10.2 needs Go >= 1.26.10; the proxy serves this toolchain. It is
# used for that build only, never for the project's own go.mod.
ARGO_ROLLOUTS_TOOLCHAIN=${ARGO_ROLLOUTS_TOOLCHAIN:-go1.27.3}

TOOLS=${VLLM_PROBER_TOOLS:-$HOME/.cache/vllm_prober/tools}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GO=${GO:-go}
export GOFLAGS= GOWORK=off

log() { printf '>> e2e-tools: %s\n' "$*" >&2; }

# moddir MODULE@VERSION prints the module's directory in the module cache.
moddir() {
	"$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# srccopy MODULE@VERSION DEST copies a module's source into DEST, writable.
srccopy() {
	local dir
	dir=$(moddir "$1")
	[ -n "$dir" ] || { echo "e2e-tools: could not download $1" >&2; return 1; }
	rm -rf "$2"
	cp -r "$dir" "$2"
	chmod -R u+w "$2"
}

dir_of() {
	case "$1" in
	prometheus3) echo "$TOOLS/prometheus-$PROMETHEUS3_VERSION" ;;
	sloth) echo "$TOOLS/sloth-$SLOTH_VERSION" ;;
	pint) echo "$TOOLS/pint-$PINT_VERSION" ;;
	kubernetes) echo "$TOOLS/kubernetes-$KUBERNETES_VERSION" ;;
	etcd) echo "$TOOLS/etcd-$ETCD_VERSION" ;;
	argo-rollouts) echo "$TOOLS/argo-rollouts-$ARGO_ROLLOUTS_VERSION" ;;
	epp) echo "$TOOLS/epp-$EPP_VERSION" ;;
	llama-server) echo "$TOOLS/llama-server-$LLAMA_SERVER_NPM_VERSION" ;;
	ollama) echo "$TOOLS/ollama-$OLLAMA_VERSION" ;;
	*) echo "e2e-tools: unknown tool $1 (prometheus3, kubernetes, etcd, argo-rollouts, sloth, pint, epp, llama-server, ollama, all)" >&2; return 2 ;;
	esac
}

# Each build writes into a temporary directory beside its cache entry and renames
# it into place last, so an interrupted build never leaves a half-filled entry.
build_prometheus3() {
	local out=$1 work=$1.build
	local v=${PROMETHEUS3_VERSION#v0.} # v0.315.0 -> 315.0
	local minor=${v%%.*}
	local semver="$((minor / 100)).$((minor % 100)).${v#*.}" # -> 3.15.0
	rm -rf "$work" && mkdir -p "$work"
	log "building Prometheus $semver ($PROMETHEUS3_VERSION), about 4 minutes cold"
	srccopy "github.com/prometheus/prometheus@$PROMETHEUS3_VERSION" "$work/src"
	local ld="-X github.com/prometheus/common/version.Version=$semver"
	(cd "$work/src" &&
		CGO_ENABLED=0 "$GO" build -ldflags "$ld" -o "$work/bin/prometheus" ./cmd/prometheus &&
		CGO_ENABLED=0 "$GO" build -ldflags "$ld" -o "$work/bin/promtool" ./cmd/promtool)
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

# Sloth installs with plain go install (about 1 minute cold on an idle machine).
build_sloth() {
	local out=$1 work=$1.build
	rm -rf "$work" && mkdir -p "$work/bin"
	log "building sloth $SLOTH_VERSION"
	GOBIN="$work/bin" CGO_ENABLED=0 "$GO" install "github.com/slok/sloth/cmd/sloth@$SLOTH_VERSION"
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

build_pint() {
	local out=$1 work=$1.build
	rm -rf "$work" && mkdir -p "$work"
	log "building pint $PINT_VERSION, about 2 minutes cold"
	srccopy "github.com/cloudflare/pint@$PINT_VERSION" "$work/src"
	(cd "$work/src" && CGO_ENABLED=0 "$GO" build -mod=mod -o "$work/bin/pint" ./cmd/pint)
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

build_kubernetes() {
	local out=$1 work=$1.build
	local v=${KUBERNETES_VERSION#v} # 1.37.2
	local major=${v%%.*} rest=${v#*.}
	local minor=${rest%%.*}
	local staging="v0.${minor}.${rest#*.}" # the published k8s.io/* modules: v0.37.2
	rm -rf "$work" && mkdir -p "$work"
	log "building kube-apiserver and kubectl $KUBERNETES_VERSION, about 5 minutes cold"
	srccopy "k8s.io/kubernetes@$KUBERNETES_VERSION" "$work/src"
	(
		cd "$work/src"
		# The zip has no staging/ and an empty vendor/; its go.work points at staging.
		rm -rf go.work go.work.sum vendor
		# Every replace that points into ./staging becomes a require of the published module.
		mapfile -t stagemods < <("$GO" mod edit -json | tr -d '\n\t ' | grep -o '"Old":{"Path":"[^"]*"},"New":{"Path":"\./staging[^"]*"' | sed 's/"Old":{"Path":"\([^"]*\)".*/\1/')
		local drop=() req=() mod
		for mod in "${stagemods[@]}"; do
			drop+=("-dropreplace=$mod")
			req+=("-require=$mod@$staging")
		done
		[ "${#drop[@]}" -gt 0 ] || { echo "e2e-tools: no staging replaces found in k8s.io/kubernetes' go.mod" >&2; exit 1; }
		"$GO" mod edit "${drop[@]}" "${req[@]}"
		local date
		date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
		local ld=""
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ld+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
			ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
		done
		CGO_ENABLED=0 "$GO" build -mod=mod -ldflags "$ld" -o "$work/bin/kube-apiserver" ./cmd/kube-apiserver
		CGO_ENABLED=0 "$GO" build -mod=mod -ldflags "$ld" -o "$work/bin/kubectl" ./cmd/kubectl
	)
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

build_etcd() {
	local out=$1 work=$1.build
	rm -rf "$work" && mkdir -p "$work/mod"
	log "building etcd $ETCD_VERSION, about 30 s cold"
	(
		cd "$work/mod"
		"$GO" mod init e2e-tools/etcd >/dev/null 2>&1
		"$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >get.log 2>&1 || { cat get.log >&2; exit 1; }
		CGO_ENABLED=0 "$GO" build -o "$work/bin/etcd" go.etcd.io/etcd/server/v3
	)
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

build_argo_rollouts() {
	local out=$1 work=$1.build
	rm -rf "$work" && mkdir -p "$work/bin"
	log "building the Argo Rollouts controller $ARGO_ROLLOUTS_VERSION with $ARGO_ROLLOUTS_TOOLCHAIN, about 3.5 minutes cold"
	local dir
	dir=$(GOTOOLCHAIN=$ARGO_ROLLOUTS_TOOLCHAIN moddir "github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION")
	[ -n "$dir" ] || { echo "e2e-tools: could not download argo-rollouts $ARGO_ROLLOUTS_VERSION" >&2; return 1; }
	cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
	(cd "$work/src" && GOTOOLCHAIN=$ARGO_ROLLOUTS_TOOLCHAIN CGO_ENABLED=0 "$GO" build -mod=mod -o "$work/bin/rollouts-controller" ./cmd/rollouts-controller)
	cp -r "$work/src/manifests/crds" "$work/bin/crds"
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

# The EPP builds as a dependency of a throwaway module: `go install MODULE/cmd/epp@V`
# fails because the proxy refuses the module's version list (deprecation lookup),
# and `go get` of the module path alone leaves go.sum incomplete, so the package path
# is named. 2-6 minutes cold, 1 GB peak memory. The four CRDs come from the same zip.
build_epp() {
	local out=$1 work=$1.build
	local mod=sigs.k8s.io/gateway-api-inference-extension
	rm -rf "$work" && mkdir -p "$work/mod" "$work/bin"
	log "building the inference-extension EPP $EPP_VERSION, 2-6 minutes cold"
	(
		cd "$work/mod"
		"$GO" mod init e2e-tools/epp >/dev/null 2>&1
		"$GO" get "$mod/cmd/epp@$EPP_VERSION" >get.log 2>&1 || { cat get.log >&2; exit 1; }
		CGO_ENABLED=0 "$GO" build -ldflags='-s -w' -o "$work/bin/epp" "$mod/cmd/epp"
	)
	local dir
	dir=$(moddir "$mod@$EPP_VERSION")
	[ -n "$dir" ] || { echo "e2e-tools: could not download $mod@$EPP_VERSION" >&2; return 1; }
	mkdir -p "$work/bin/crds" && cp "$dir"/config/crd/bases/*.yaml "$work/bin/crds/" && chmod -R u+w "$work/bin/crds"
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

# llama-server builds from the llama.cpp source inside the npm package node-llama-cpp
# (llama/gitRelease.bundle): npm pack, integrity check, git clone of the bundle, a
# CPU-only CMake build of the llama-server target alone. About 7 minutes cold on 2
# cores. Offline it needs LLAMA_USE_PREBUILT_UI=OFF (ON downloads the web UI at build
# time) and LLAMA_OPENSSL=OFF. GGML_NATIVE=ON (-march=native) suits a cache that stays
# on its machine. Only the 15 MB binary is kept (the build tree is about 300 MB).
build_llama_server() {
	local out=$1 work=$1.build
	local pkg=node-llama-cpp-$LLAMA_SERVER_NPM_VERSION.tgz
	command -v npm >/dev/null && command -v cmake >/dev/null && command -v g++ >/dev/null ||
		{ echo "e2e-tools: llama-server needs npm, cmake and g++ (scripts/apt-install.sh npm cmake g++)" >&2; return 1; }
	rm -rf "$work" && mkdir -p "$work/bin"
	log "building llama-server from node-llama-cpp@$LLAMA_SERVER_NPM_VERSION, about 7 minutes cold"
	(cd "$work" && npm pack --silent "node-llama-cpp@$LLAMA_SERVER_NPM_VERSION" >/dev/null)
	local got
	got="sha512-$(openssl dgst -sha512 -binary "$work/$pkg" | base64 -w0)"
	[ "$got" = "$LLAMA_SERVER_NPM_INTEGRITY" ] ||
		{ echo "e2e-tools: $pkg integrity $got, want $LLAMA_SERVER_NPM_INTEGRITY" >&2; return 1; }
	tar -xzf "$work/$pkg" -C "$work" package/llama/gitRelease.bundle
	git -c advice.detachedHead=false clone -q "$work/package/llama/gitRelease.bundle" "$work/llama.cpp"
	rm -rf "$work/package" "$work/$pkg"
	nice -n 10 cmake -S "$work/llama.cpp" -B "$work/llama.cpp/build" -DCMAKE_BUILD_TYPE=Release \
		-DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF \
		-DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DGGML_NATIVE=ON \
		>"$work/cmake.log" 2>&1 || { tail -40 "$work/cmake.log" >&2; return 1; }
	nice -n 10 cmake --build "$work/llama.cpp/build" --target llama-server -j2 \
		>"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; return 1; }
	cp "$work/llama.cpp/build/bin/llama-server" "$work/bin/llama-server"
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

# Ollama builds from the module proxy's zip with cgo (its vendored llama.cpp and ggml
# compile as part of the Go packages). `go install` alone fails: the zip drops
# llama.cpp's vendor/ headers. Debian provides nlohmann/json.hpp and stb/stb_image.h;
# miniaudio.h, which Debian lacks, is a stub in scripts/ollama/ (audio input off).
# -march=native: a plain go build has no step choosing the ggml CPU variant, and the
# generic x86-64 build decodes about twice as slowly. The version is stamped as
# Ollama's release build does (else it reports 0.0.0). About 6 minutes cold, 75 MB.
build_ollama() {
	local out=$1 work=$1.build
	command -v g++ >/dev/null || { echo "e2e-tools: ollama needs g++ (scripts/apt-install.sh g++)" >&2; return 1; }
	[ -f /usr/include/nlohmann/json.hpp ] && [ -f /usr/include/stb/stb_image.h ] ||
		{ echo "e2e-tools: ollama needs scripts/apt-install.sh nlohmann-json3-dev libstb-dev" >&2; return 1; }
	rm -rf "$work" && mkdir -p "$work/bin"
	log "building Ollama $OLLAMA_VERSION with cgo, about 6 minutes cold"
	srccopy "github.com/ollama/ollama@$OLLAMA_VERSION" "$work/src"
	(cd "$work/src" &&
		CGO_ENABLED=1 CGO_CPPFLAGS="-I$HERE/ollama" CGO_CFLAGS="-O3 -march=native" CGO_CXXFLAGS="-O3 -march=native" \
			nice -n 10 "$GO" build -mod=mod -ldflags "-X github.com/ollama/ollama/version.Version=${OLLAMA_VERSION#v}" \
			-o "$work/bin/ollama" .) >"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; return 1; }
	rm -rf "$out" && mv "$work/bin" "$out" && rm -rf "$work"
}

ensure() {
	local name=$1 out
	out=$(dir_of "$name")
	local first
	case "$name" in
	prometheus3) first=promtool ;;
	sloth) first=sloth ;;
	pint) first=pint ;;
	kubernetes) first=kubectl ;;
	etcd) first=etcd ;;
	argo-rollouts) first=rollouts-controller ;;
	epp) first=epp ;;
	llama-server) first=llama-server ;;
	ollama) first=ollama ;;
	esac
	if [ ! -x "$out/$first" ]; then
		mkdir -p "$TOOLS"
		# One build per tool at a time: a second caller waits here for the first,
		# then finds the binary in place.
		exec {lock}>"$out.lock"
		flock "$lock"
		[ -x "$out/$first" ] || "build_${name//-/_}" "$out"
		exec {lock}>&-
	fi
	[ -n "$only_dir" ] && echo "$out" || echo "$name $out"
}

only_dir=
if [ "${1:-}" = --dir ]; then
	only_dir=1
	shift
fi
[ "$#" -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
tools=()
for t in "$@"; do
	if [ "$t" = all ]; then tools+=(prometheus3 kubernetes etcd argo-rollouts sloth pint epp llama-server ollama); else dir_of "$t" >/dev/null; tools+=("$t"); fi
done
for t in "${tools[@]}"; do
	ensure "$t"
done
