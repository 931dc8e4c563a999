#!/usr/bin/env bash
# Builds the pinned kubelet from the Go module proxy into a cache outside the
# work tree (hack/k8s-binary.sh), for the e2e spec where a real kubelet is
# the host's agent and for the conformance harness's kubelet column. A no-op
# when the binary is already there. Prints the binary's path on stdout.
set -euo pipefail
exec bash "$(dirname "$0")/k8s-binary.sh" kubelet
