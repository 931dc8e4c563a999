#!/usr/bin/env bash
# Builds the container runtime the tests, the local cluster and the
# benchmarks run by default, from the Go module proxy, into a cache outside
# the work tree:
#   hack/runtime.sh            containerd 2 and runc (the default runtime)
#   hack/runtime.sh containerd2
#   hack/runtime.sh containerd1.6
# containerd 2 is containerd, containerd-shim-runc-v2 and ctr at
# CONTAINERD_VERSION, static and pure Go, and runc at RUNC_VERSION, static
# with libseccomp (cgo, Debian's libseccomp-dev). containerd1.6 is Debian's
# packages (hack/install-deps.sh installs them): nothing is built and the
# directory printed is one of links to them. A no-op when the binaries are
# there. Prints the directory that holds them on stdout: put it first on
# PATH (containerd finds the shim there, the shim runc).
set -euo pipefail

RUNTIME="${1:-${RUNTIME:-containerd2}}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-2.4.2}"
RUNC_VERSION="${RUNC_VERSION:-1.5.3}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"

log() { echo "runtime: $*" >&2; }

case $RUNTIME in
containerd1.6 | containerd1)
	# Debian 12's containerd 1.6 and runc 1.1, as installed by
	# hack/install-deps.sh; links, so that the caller's PATH handling is
	# the same for both runtimes.
	out="$CACHE_ROOT/runtime-debian"
	mkdir -p "$out"
	for b in containerd containerd-shim-runc-v2 ctr runc; do
		src=$(command -v "$b") || { log "$b is not installed: run hack/install-deps.sh"; exit 1; }
		ln -sfn "$src" "$out/$b"
	done
	echo "$out"
	exit 0
	;;
containerd2) ;;
*)
	log "unknown runtime $RUNTIME (containerd2 or containerd1.6)"
	exit 1
	;;
esac

OUT="$CACHE_ROOT/runtime-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION"
BINARIES=(containerd containerd-shim-runc-v2 ctr runc)

have_all() {
	local b
	for b in "${BINARIES[@]}"; do [[ -x $OUT/$b ]] || return 1; done
}

if have_all; then
	echo "$OUT"
	exit 0
fi

mkdir -p "$OUT"
# One build at a time; a second caller (another suite, a parallel ginkgo
# process) waits for the first.
exec 9>"$OUT/.lock"
flock 9
if have_all; then
	echo "$OUT"
	exit 0
fi

export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
dir="$CACHE_ROOT/build/runtime-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION"
mkdir -p "$dir"
cd "$dir"
[[ -f go.mod ]] || go mod init nodelet.local/runtime >/dev/null 2>&1

start=$(date +%s)
if [[ ! -x $OUT/containerd || ! -x $OUT/containerd-shim-runc-v2 || ! -x $OUT/ctr ]]; then
	log "resolving containerd v$CONTAINERD_VERSION"
	for c in containerd containerd-shim-runc-v2 ctr; do
		go get -tool "github.com/containerd/containerd/v2/cmd/$c@v$CONTAINERD_VERSION" >&2
	done
	# Static and pure Go, as containerd's release builds are: no btrfs
	# snapshotter (it needs cgo and libbtrfs), which nodelet never uses.
	# The version stamp makes the CRI report it (RuntimeVersion).
	v=github.com/containerd/containerd/v2/version
	ldflags="-s -w -X $v.Version=v$CONTAINERD_VERSION -X $v.Revision=nodelet-build -X $v.Package=github.com/containerd/containerd/v2"
	for c in containerd containerd-shim-runc-v2 ctr; do
		if [[ ! -x $OUT/$c ]]; then
			log "building $c v$CONTAINERD_VERSION (a few minutes the first time)"
			CGO_ENABLED=0 go build -tags no_btrfs -ldflags "$ldflags" -o "$OUT/$c.tmp" "github.com/containerd/containerd/v2/cmd/$c" >&2
			mv "$OUT/$c.tmp" "$OUT/$c"
		fi
	done
fi

if [[ ! -x $OUT/runc ]]; then
	if [[ ! -e /usr/include/seccomp.h ]] || ! command -v pkg-config >/dev/null; then
		log "runc needs libseccomp-dev and pkg-config: run hack/install-deps.sh"
		exit 1
	fi
	log "resolving runc v$RUNC_VERSION"
	go get -tool "github.com/opencontainers/runc@v$RUNC_VERSION" >&2
	log "building runc v$RUNC_VERSION"
	# runc's own static build: cgo for libseccomp and the nsexec
	# constructor, linked statically so that the binary runs on any
	# distribution's libc (a cgroup v2 test host has none of Debian's).
	CGO_ENABLED=1 go build -tags "seccomp netgo osusergo urfave_cli_no_docs" \
		-ldflags "-s -w -X main.version=$RUNC_VERSION -extldflags -static" \
		-o "$OUT/runc.tmp" github.com/opencontainers/runc >&2
	mv "$OUT/runc.tmp" "$OUT/runc"
fi
log "built containerd v$CONTAINERD_VERSION and runc v$RUNC_VERSION into $OUT in $(($(date +%s) - start)) s"
echo "$OUT"
