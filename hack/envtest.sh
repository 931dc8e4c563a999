#!/usr/bin/env bash
# Builds the pinned kube-apiserver, etcd, kubectl, kube-controller-manager and
# kube-scheduler that the integration and e2e tests and the local cluster run, from the Go module proxy, into a cache outside the work tree.
# A no-op when the binaries are already there. Prints the directory on stdout;
# that is what KUBEBUILDER_ASSETS must point at.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.0}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
ASSETS="$CACHE_ROOT/k8s-$K8S_VERSION"
BINARIES=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler)

have_all() {
	for b in "${BINARIES[@]}"; do [[ -x "$ASSETS/$b" ]] || return 1; done
}

if have_all; then
	echo "$ASSETS"
	exit 0
fi

mkdir -p "$ASSETS"
log() { echo "envtest: $*" >&2; }
export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# Static, as Kubernetes' release builds are, and with the cgo setting of
# every other build of the project (the Makefile's), so that they share
# compiled packages: e2e.test's with agnhost's, all of them with the
# kubelet's and kube-proxy's.
export CGO_ENABLED=0
# No symbol table or DWARF (-s -w): nothing here is debugged, and leaving
# them out halves the link (kube-apiserver: 25 s to 13.5 s on 2 cores).

build_k8s() {
	local dir="$CACHE_ROOT/build/k8s-$K8S_VERSION"
	mkdir -p "$dir"
	cd "$dir"
	[[ -f go.mod ]] || go mod init nodelet.local/envtest-k8s >/dev/null 2>&1
	log "resolving k8s.io/kubernetes v$K8S_VERSION"
	go get "k8s.io/kubernetes@v$K8S_VERSION" >&2
	# k8s.io/kubernetes replaces its staging modules with local paths; point
	# each of them at the published module of the same minor version instead.
	local gomod staging
	gomod="$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION/go.mod"
	staging="$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&$1 ~ /^k8s.io\//{print $1}' "$gomod")"
	local staging_version="v0.${K8S_VERSION#1.}"
	for m in $staging; do
		go mod edit -replace "$m=$m@$staging_version"
	done
	for b in kube-apiserver kubectl kube-controller-manager kube-scheduler; do
		if [[ ! -x "$ASSETS/$b" ]]; then
			go get -tool "k8s.io/kubernetes/cmd/$b@v$K8S_VERSION" >&2
			log "building $b (several minutes the first time)"
			go build -ldflags "-s -w" -o "$ASSETS/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2
			mv "$ASSETS/$b.tmp" "$ASSETS/$b"
		fi
	done
}

build_etcd() {
	[[ -x "$ASSETS/etcd" ]] && return 0
	local dir="$CACHE_ROOT/build/etcd-$ETCD_VERSION"
	mkdir -p "$dir"
	cd "$dir"
	[[ -f go.mod ]] || go mod init nodelet.local/envtest-etcd >/dev/null 2>&1
	go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
	log "building etcd"
	go build -ldflags "-s -w" -o "$ASSETS/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
	mv "$ASSETS/etcd.tmp" "$ASSETS/etcd"
}

build_etcd
build_k8s
have_all
echo "$ASSETS"
