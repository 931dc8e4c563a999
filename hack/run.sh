#!/usr/bin/env bash
# make run: nodelet against the cluster in $KUBECONFIG when it is set (pass
# more flags in NODELET_ARGS, e.g. --config), else against a local API
# server and a private containerd that this project installs and starts.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${KUBECONFIG:-}" ]]; then
	# shellcheck disable=SC2086 # NODELET_ARGS is a list of flags.
	exec bin/nodelet --kubeconfig "$KUBECONFIG" ${NODELET_ARGS:-}
fi
exec go run ./hack/localup
