#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum, and says how to fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp go.mod go.sum "$tmp/"
go mod tidy
if ! cmp -s go.mod "$tmp/go.mod" || ! cmp -s go.sum "$tmp/go.sum"; then
	diff -u "$tmp/go.mod" go.mod || true
	cp "$tmp/go.mod" "$tmp/go.sum" .
	echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result" >&2
	exit 1
fi
echo "go.mod and go.sum are tidy"
