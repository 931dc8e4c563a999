#!/usr/bin/env bash
# Builds the pinned golangci-lint from the Go module proxy into the cache
# outside the work tree (a no-op when present) and prints its path.
set -euo pipefail

VERSION="${GOLANGCI_LINT_VERSION:-v2.15.0}"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
BIN_DIR="$CACHE_ROOT/golangci-lint-$VERSION"
BIN="$BIN_DIR/golangci-lint"

if [[ ! -x "$BIN" ]]; then
	echo "golangci-lint: building $VERSION (a few minutes the first time)" >&2
	mkdir -p "$BIN_DIR"
	GOFLAGS="-buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOBIN="$BIN_DIR.tmp" \
		go install -ldflags "-s -w" "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$VERSION" >&2
	mv "$BIN_DIR.tmp/golangci-lint" "$BIN"
	rmdir "$BIN_DIR.tmp"
fi
echo "$BIN"
