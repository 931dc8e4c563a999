#!/usr/bin/env bash
# Gives the Go module in the current directory (the build directory of a
# third-party program the tests run: the CSI sidecars, CoreDNS) nodelet's
# version of every module both graphs select: a higher one by requiring it,
# a lower one by replacing the module with nodelet's version. Packages
# compile once per distinct set of dependencies, so a sidecar built with
# its own client-go, gRPC and protobuf compiles all of them again (minutes
# on two cores with a cold build cache); aligned, it reuses what nodelet's
# build compiled. The versions differ by patch and minor releases; a caller
# whose build fails aligned builds with the module's own versions
# (ALIGN_DEPS=0 skips this script).
#
# The Kubernetes builds (hack/envtest.sh, hack/k8s-binary.sh,
# hack/conformance.sh) keep the versions their release pins.
#
#   (cd <module dir> && bash <nodelet>/hack/align-deps.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Path and version of every module of a graph but the main module, with
# the version it is replaced by, if any, and "r" after a replaced one.
# Modules replaced by a directory or another module are left out.
list='{{if not .Main}}{{with .Replace}}{{if and .Version (eq .Path $.Path)}}{{.Path}} {{.Version}} r{{end}}{{else}}{{.Path}} {{.Version}}{{end}}{{end}}'

ours="$(cd "$ROOT" && GOFLAGS=-mod=readonly go list -m -f "$list" all | awk '{print $1, $2}' | sort)"
# Requiring a newer module can raise what it requires in turn: repeat
# until nothing changes.
for _ in 1 2 3; do
	theirs="$(GOFLAGS=-mod=mod go list -m -f "$list" all | sort)"
	args=()
	while read -r path mine other replaced; do
		[[ $mine == "$other" ]] && continue
		if [[ -z $replaced && "$(printf '%s\n%s\n' "$mine" "$other" | sort -V | tail -1)" == "$mine" ]]; then
			args+=("-require=$path@$mine")
		else
			args+=("-replace=$path=$path@$mine")
		fi
	done < <(join <(echo "$ours") <(echo "$theirs"))
	if ((${#args[@]} > 0)); then
		go mod edit "${args[@]}"
		echo "align-deps: $(basename "$PWD"): ${#args[@]} modules set to nodelet's versions" >&2
	fi
	((${#args[@]} > 0)) || break
done
