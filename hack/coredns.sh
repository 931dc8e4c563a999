#!/usr/bin/env bash
# Builds CoreDNS for the cluster add-on image (test/utils/addons_images.go)
# from the Go module proxy into a cache outside the work tree: the main in
# hack/coredns, which links only the plugins a cluster DNS needs, built in a
# copy of that module under the cache so the project's go.mod stays as it
# is. The output directory is named by the CoreDNS version and a hash of the
# module's files, so a changed plugin list builds again; a no-op when the
# binary is already there. Prints the binary's path on stdout.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/coredns" && pwd)"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
VERSION="$(awk '$1=="require" && $2=="github.com/coredns/coredns"{print $3}' "$SRC/go.mod")"
if [[ -z $VERSION ]]; then
	echo "coredns: no github.com/coredns/coredns requirement in $SRC/go.mod" >&2
	exit 1
fi
HASH="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-12)"
OUT="$CACHE_ROOT/coredns-$VERSION-$HASH"
BIN="$OUT/coredns"

have() { [[ -x $BIN ]] && "$BIN" -version 2>/dev/null | grep -qx "CoreDNS-${VERSION#v}"; }

if have; then
	echo "$BIN"
	exit 0
fi

log() { echo "coredns: $*" >&2; }
export GOFLAGS="-buildvcs=false -mod=mod"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if have; then
	echo "$BIN"
	exit 0
fi

dir="$CACHE_ROOT/build/coredns-$VERSION-$HASH"
mkdir -p "$dir"
cp "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" "$dir/"
cd "$dir"
log "building CoreDNS $VERSION (a minute or two the first time)"
start=$(date +%s)
# Static, with the cgo setting and, where they share modules, the versions
# of nodelet's build (hack/align-deps.sh), so that the packages they share
# compile once; with hack/coredns's own versions if that build fails.
export CGO_ENABLED=0
build() { go build -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$VERSION" -o "$BIN.tmp" . >&2; }
if ! { [[ ${ALIGN_DEPS:-1} != 0 ]] && bash "$SRC/../align-deps.sh" && build; }; then
	log "building with hack/coredns's own dependency versions"
	cp "$SRC/go.mod" "$SRC/go.sum" "$dir/"
	build
fi
mv "$BIN.tmp" "$BIN"
log "built $BIN in $(($(date +%s) - start)) s"
echo "$BIN"
