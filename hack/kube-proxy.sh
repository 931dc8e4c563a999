#!/usr/bin/env bash
# Builds the pinned kube-proxy from the Go module proxy into a cache outside
# the work tree (hack/k8s-binary.sh, beside the kubelet, sharing its build
# cache), stripped, for the cluster add-on image
# (test/utils/addons_images.go). A no-op when the binary is already there.
# Prints the binary's path on stdout.
set -euo pipefail
exec bash "$(dirname "$0")/k8s-binary.sh" kube-proxy
