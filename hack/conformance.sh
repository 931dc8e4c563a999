#!/usr/bin/env bash
# Builds what the conformance run needs from the Go module proxy, into a cache
# outside the work tree (like hack/envtest.sh): Kubernetes' e2e.test, the
# ginkgo CLI at the version k8s.io/kubernetes pins, the real kubelet (the
# comparison column), agnhost (the e2e suite's test image, static) and the
# sample device plugin (the node suite's device plugin image, static).
# A no-op when the binaries are already there. Prints the directory on stdout.
#
#   hack/conformance.sh            build (or find) the binaries, print the directory
#   hack/conformance.sh e2e.test   build only the named binaries
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

K8S_VERSION="${K8S_VERSION:-1.37.0}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
OUT="$CACHE_ROOT/conformance-$K8S_VERSION"
ALL=(e2e.test ginkgo kubelet agnhost sample-device-plugin)
WANT=("$@")
[[ ${#WANT[@]} -gt 0 ]] || WANT=("${ALL[@]}")

log() { echo "conformance: $(date +%T) $*" >&2; }

have() {
	for b in "$@"; do [[ -x "$OUT/$b" ]] || return 1; done
}

if have "${WANT[@]}"; then
	echo "$OUT"
	exit 0
fi

mkdir -p "$OUT"
export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# Static, as Kubernetes' release builds are, and with the cgo setting of
# every other build of the project (the Makefile's), so that they share
# compiled packages: e2e.test's with agnhost's, all of them with the
# kubelet's and kube-proxy's.
export CGO_ENABLED=0

# Only one build at a time per cache: a second caller waits for the first.
exec 9>"$CACHE_ROOT/conformance.lock"
flock 9
if have "${WANT[@]}"; then
	echo "$OUT"
	exit 0
fi

# module prepares a throw-away module that requires k8s.io/kubernetes and
# points each staging module it replaces with a local path at the published
# module of the same minor version (the approach of hack/envtest.sh; a
# directory of our own so a concurrent envtest build never edits it under us).
module() {
	local dir="$CACHE_ROOT/build/conformance-k8s-$K8S_VERSION"
	mkdir -p "$dir"
	cd "$dir"
	[[ -f go.mod ]] || go mod init nodelet.local/conformance-k8s >/dev/null 2>&1
	if ! grep -q "k8s.io/kubernetes v$K8S_VERSION" go.mod; then
		log "resolving k8s.io/kubernetes v$K8S_VERSION"
		go get "k8s.io/kubernetes@v$K8S_VERSION" >&2
		local gomod staging m
		gomod="$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION/go.mod"
		staging="$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&$1 ~ /^k8s.io\//{print $1}' "$gomod")"
		for m in $staging; do
			go mod edit -replace "$m=$m@v0.${K8S_VERSION#1.}"
		done
	fi
}

# timed runs a build step and logs how long it took.
timed() {
	local what="$1"
	shift
	local start=$SECONDS
	log "building $what (several minutes the first time)"
	"$@" >&2
	log "built $what in $((SECONDS - start))s"
}

build() {
	local b="$1"
	[[ -x "$OUT/$b" ]] && return 0
	case "$b" in
	e2e.test)
		# go test -c needs the test-only dependencies in go.mod too.
		go get "k8s.io/kubernetes/test/e2e@v$K8S_VERSION" >&2
		timed e2e.test go test -c -ldflags "-s -w" -o "$OUT/$b.tmp" k8s.io/kubernetes/test/e2e
		;;
	ginkgo)
		local v
		v="$(awk '$1=="github.com/onsi/ginkgo/v2"{print $2; exit}' "$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION/go.mod")"
		go get -tool "github.com/onsi/ginkgo/v2/ginkgo@$v" >&2
		timed "ginkgo $v" go build -ldflags "-s -w" -o "$OUT/$b.tmp" github.com/onsi/ginkgo/v2/ginkgo
		;;
	kubelet)
		# The one kubelet build of the project (version-stamped, cached),
		# which the DaemonSet e2e runs too.
		local src
		src="$(bash "$HACK_DIR/kubelet.sh")"
		cp "$src" "$OUT/$b.tmp"
		;;
	agnhost)
		go get -tool "k8s.io/kubernetes/test/images/agnhost@v$K8S_VERSION" >&2
		# Static (CGO_ENABLED=0 above) for images without a libc, with the
		# build settings of e2e.test, so it reuses its compiled packages.
		timed "agnhost (static)" go build -ldflags="-s -w" \
			-o "$OUT/$b.tmp" k8s.io/kubernetes/test/images/agnhost
		;;
	sample-device-plugin)
		# The node suite's device plugin (test/images/sample-device-plugin):
		# static like agnhost, for an image on the harness's busybox.
		go get -tool "k8s.io/kubernetes/test/images/sample-device-plugin@v$K8S_VERSION" >&2
		timed "sample-device-plugin (static)" go build -ldflags="-s -w" \
			-o "$OUT/$b.tmp" k8s.io/kubernetes/test/images/sample-device-plugin
		;;
	*)
		echo "conformance: unknown binary $b (want one of ${ALL[*]})" >&2
		return 1
		;;
	esac
	mv "$OUT/$b.tmp" "$OUT/$b"
}

start=$SECONDS
module
for b in "${WANT[@]}"; do build "$b"; done
have "${WANT[@]}"
log "all built in $((SECONDS - start))s"
echo "$OUT"
