#!/usr/bin/env bash
# Fails when `go mod tidy` would change a go.mod or go.sum, and says how to
# fix it: the root module's and each example module's under examples/, or
# the modules of the directories given as arguments (make dashboards gives
# test/dashboards, which requires Prometheus, as nodelet's must not).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
dirs=("$@")
[[ ${#dirs[@]} -gt 0 ]] || dirs=(. examples/*/)
for dir in "${dirs[@]}"; do
	dir="${dir%/}"
	[[ -f "$root/$dir/go.mod" ]] || continue
	cd "$root/$dir"
	cp go.mod go.sum "$tmp/"
	go mod tidy
	if ! cmp -s go.mod "$tmp/go.mod" || ! cmp -s go.sum "$tmp/go.sum"; then
		diff -u "$tmp/go.mod" go.mod || true
		cp "$tmp/go.mod" "$tmp/go.sum" .
		echo "$dir: go.mod/go.sum are not tidy: run 'go mod tidy' in $dir and commit the result" >&2
		status=1
		continue
	fi
	echo "$dir: go.mod and go.sum are tidy"
done
exit "$status"
