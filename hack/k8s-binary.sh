#!/usr/bin/env bash
# Builds one command of the pinned Kubernetes (kubelet, kube-proxy) from the
# Go module proxy into a cache outside the work tree:
#   hack/k8s-binary.sh <command> [extra -ldflags]
# Every command is built in one module directory with the release build's
# version stamp, so they share the Go build cache and the second costs little
# once the first is built. A no-op when the binary is already there. Prints
# the binary's path on stdout.
set -euo pipefail

CMD="${1:?usage: k8s-binary.sh <command> [ldflags]}"
EXTRA_LDFLAGS="${2:-}"
K8S_VERSION="${K8S_VERSION:-1.37.0}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
OUT="$CACHE_ROOT/$CMD-$K8S_VERSION"
BIN="$OUT/$CMD"

# A binary that does not report the version (built without the version
# stamp below) is built again.
have() { [[ -x $BIN ]] && [[ $("$BIN" --version 2>/dev/null) == "Kubernetes v$K8S_VERSION" ]]; }

if have; then
	echo "$BIN"
	exit 0
fi

log() { echo "$CMD: $*" >&2; }
export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# Static, as Kubernetes' release builds are, and with the cgo setting of
# every other build of the project (the Makefile's), so that they share
# compiled packages: e2e.test's with agnhost's, all of them with the
# kubelet's and kube-proxy's.
export CGO_ENABLED=0

# One build at a time in the shared module directory (its go.mod is edited
# below); a second caller waits for the first. The lock is the kubelet's
# output directory's, where older versions of this script took it.
mkdir -p "$OUT" "$CACHE_ROOT/kubelet-$K8S_VERSION"
exec 9>"$CACHE_ROOT/kubelet-$K8S_VERSION/.lock"
flock 9
if have; then
	echo "$BIN"
	exit 0
fi

dir="$CACHE_ROOT/build/kubelet-$K8S_VERSION"
mkdir -p "$dir"
cd "$dir"
[[ -f go.mod ]] || go mod init nodelet.local/kubelet >/dev/null 2>&1
if ! grep -q "^replace k8s.io/api => k8s.io/api v0.${K8S_VERSION#1.}" go.mod; then
	log "resolving k8s.io/kubernetes v$K8S_VERSION"
	go get "k8s.io/kubernetes@v$K8S_VERSION" >&2
	# k8s.io/kubernetes replaces its staging modules with local paths; point
	# each of them at the published module of the same minor version.
	gomod="$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION/go.mod"
	staging="$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&$1 ~ /^k8s.io\//{print $1}' "$gomod")"
	for m in $staging; do
		go mod edit -replace "$m=$m@v0.${K8S_VERSION#1.}"
	done
fi
go get -tool "k8s.io/kubernetes/cmd/$CMD@v$K8S_VERSION" >&2
log "building $CMD (several minutes the first time)"
start=$(date +%s)
# Stamp the version as Kubernetes' release build does, so that the binary
# reports v$K8S_VERSION (a kubelet's Node its kubeletVersion), not
# v0.0.0-master. No symbol table or DWARF (-s -w), as in hack/envtest.sh.
v=k8s.io/component-base/version
minor=${K8S_VERSION#*.}
minor=${minor%%.*}
go build -ldflags "-X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=${K8S_VERSION%%.*} -X $v.gitMinor=$minor -X $v.gitTreeState=clean -s -w $EXTRA_LDFLAGS" \
	-o "$BIN.tmp" "k8s.io/kubernetes/cmd/$CMD" >&2
mv "$BIN.tmp" "$BIN"
log "built $BIN in $(($(date +%s) - start)) s"
echo "$BIN"
