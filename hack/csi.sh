#!/usr/bin/env bash
# Builds the kubernetes-csi sidecars the CSI test stack runs beside the test
# driver (external-provisioner and external-attacher) from the Go module
# proxy, into a cache outside the work tree (like hack/envtest.sh).
# Their modules carry replace directives, so they cannot be `go install`ed:
# each module is copied out of the module cache into a writable build
# directory and built there. A no-op when the binaries are already there.
# Prints the directory on stdout.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

PROVISIONER_VERSION="${CSI_PROVISIONER_VERSION:-v6.4.0}"
ATTACHER_VERSION="${CSI_ATTACHER_VERSION:-v4.13.0}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
OUT="$CACHE_ROOT/csi-$PROVISIONER_VERSION-$ATTACHER_VERSION"
BINARIES=(csi-provisioner csi-attacher)

log() { echo "csi: $(date +%T) $*" >&2; }

have_all() {
	for b in "${BINARIES[@]}"; do [[ -x "$OUT/$b" ]] || return 1; done
}

if have_all; then
	echo "$OUT"
	exit 0
fi

mkdir -p "$OUT"
export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# Static, and with the cgo setting of every other build of the project (the
# Makefile's), so that the packages they share compile once.
export CGO_ENABLED=0

# Only one build at a time per cache: a second caller waits for the first.
exec 9>"$CACHE_ROOT/csi.lock"
flock 9
if have_all; then
	echo "$OUT"
	exit 0
fi

# aligned_build <output> <package> builds in the current module with
# nodelet's versions of the modules both use (hack/align-deps.sh), so that
# the packages they share compile once; if that build fails, with the
# module's own.
aligned_build() {
	local out="$1" pkg="$2"
	[[ -f go.mod.own ]] || cp go.mod go.mod.own
	[[ -f go.sum.own ]] || cp go.sum go.sum.own
	if [[ ${ALIGN_DEPS:-1} != 0 ]] && bash "$HACK_DIR/align-deps.sh" &&
		go build -ldflags "-s -w" -o "$out" "$pkg"; then
		return 0
	fi
	log "building $pkg with its module's own dependency versions"
	cp go.mod.own go.mod
	cp go.sum.own go.sum
	go build -ldflags "-s -w" -o "$out" "$pkg"
}

# build <binary> <module> <version> <package inside the module>
build() {
	local bin="$1" mod="$2" ver="$3" pkg="$4"
	[[ -x "$OUT/$bin" ]] && return 0
	local src dir start=$SECONDS
	log "downloading $mod@$ver"
	src="$(GOFLAGS=-mod=mod go mod download -json "$mod@$ver" | awk -F'"' '$2=="Dir"{print $4; exit}')"
	if [[ -z "$src" || ! -d "$src" ]]; then
		log "go mod download printed no directory for $mod@$ver"
		return 1
	fi
	dir="$CACHE_ROOT/build/$bin-$ver"
	if [[ ! -f "$dir/go.mod" ]]; then
		rm -rf "$dir"
		mkdir -p "$(dirname "$dir")"
		cp -r "$src" "$dir"
		chmod -R u+w "$dir"
	fi
	log "building $bin $ver (several minutes the first time)"
	(cd "$dir" && aligned_build "$OUT/$bin.tmp" "$pkg") >&2
	mv "$OUT/$bin.tmp" "$OUT/$bin"
	log "built $bin in $((SECONDS - start))s"
}

# go mod download needs a module to run in, but not ours.
cd "$CACHE_ROOT"
build csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 "$PROVISIONER_VERSION" ./cmd/csi-provisioner
build csi-attacher github.com/kubernetes-csi/external-attacher/v4 "$ATTACHER_VERSION" ./cmd/csi-attacher
have_all
echo "$OUT"
