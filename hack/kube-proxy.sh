#!/usr/bin/env bash
# Builds the pinned kube-proxy from the Go module proxy into a cache outside
# the work tree, for the cluster add-on image (test/utils/addons_images.go).
# It is built in the module directory hack/kubelet.sh builds the kubelet in,
# with the same build flags and version stamp (only stripped, which is a
# link-time choice), so the two share the Go build cache and one of them
# costs little once the other is built. A no-op when the binary is already
# there. Prints the binary's path on stdout.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.0}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
OUT="$CACHE_ROOT/kube-proxy-$K8S_VERSION"
BIN="$OUT/kube-proxy"

have() { [[ -x $BIN ]] && [[ $("$BIN" --version 2>/dev/null) == "Kubernetes v$K8S_VERSION" ]]; }

if have; then
	echo "$BIN"
	exit 0
fi

log() { echo "kube-proxy: $*" >&2; }
export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

# The module directory is the kubelet's: take the lock hack/kubelet.sh
# takes, so that neither edits its go.mod while the other builds.
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
go get -tool "k8s.io/kubernetes/cmd/kube-proxy@v$K8S_VERSION" >&2
log "building kube-proxy (minutes the first time, less when the kubelet is built)"
start=$(date +%s)
# The release build's version stamp, as hack/kubelet.sh sets it.
v=k8s.io/component-base/version
minor=${K8S_VERSION#*.}
minor=${minor%%.*}
go build -ldflags "-X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=${K8S_VERSION%%.*} -X $v.gitMinor=$minor -X $v.gitTreeState=clean -s -w" \
	-o "$BIN.tmp" k8s.io/kubernetes/cmd/kube-proxy >&2
mv "$BIN.tmp" "$BIN"
log "built $BIN in $(($(date +%s) - start)) s"
echo "$BIN"
