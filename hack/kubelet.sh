#!/usr/bin/env bash
# Builds the pinned kubelet from the Go module proxy into a cache outside the
# work tree, for the e2e spec where a real kubelet is the host's agent and
# runs nodelet's DaemonSet pod. A no-op when the binary is already there.
# Prints the binary's path on stdout.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.0}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
OUT="$CACHE_ROOT/kubelet-$K8S_VERSION"
BIN="$OUT/kubelet"

# A binary that does not report the version (built without the version
# stamp below) is built again.
have() { [[ -x $BIN ]] && [[ $("$BIN" --version 2>/dev/null) == "Kubernetes v$K8S_VERSION" ]]; }

if have; then
	echo "$BIN"
	exit 0
fi

log() { echo "kubelet: $*" >&2; }
export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

# One build at a time on this machine; a second caller waits for the first.
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if have; then
	echo "$BIN"
	exit 0
fi

dir="$CACHE_ROOT/build/kubelet-$K8S_VERSION"
mkdir -p "$dir"
cd "$dir"
[[ -f go.mod ]] || go mod init nodelet.local/kubelet >/dev/null 2>&1
log "resolving k8s.io/kubernetes v$K8S_VERSION"
go get "k8s.io/kubernetes@v$K8S_VERSION" >&2
# k8s.io/kubernetes replaces its staging modules with local paths; point each
# of them at the published module of the same minor version instead.
gomod="$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION/go.mod"
staging="$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&$1 ~ /^k8s.io\//{print $1}' "$gomod")"
for m in $staging; do
	go mod edit -replace "$m=$m@v0.${K8S_VERSION#1.}"
done
go get -tool "k8s.io/kubernetes/cmd/kubelet@v$K8S_VERSION" >&2
log "building kubelet (several minutes the first time)"
start=$(date +%s)
# Stamp the version as Kubernetes' release build does, so that the Node
# reports kubeletVersion v$K8S_VERSION and not v0.0.0-master.
v=k8s.io/component-base/version
minor=${K8S_VERSION#*.}
minor=${minor%%.*}
go build -ldflags "-X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=${K8S_VERSION%%.*} -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
	-o "$BIN.tmp" k8s.io/kubernetes/cmd/kubelet >&2
mv "$BIN.tmp" "$BIN"
log "built $BIN in $(($(date +%s) - start)) s"
echo "$BIN"
