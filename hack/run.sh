#!/usr/bin/env bash
# make run and make run-down.
#
# With $KUBECONFIG set, make run runs bin/nodelet against that cluster on
# this machine's own container runtime (nodelet's default endpoint,
# unix:///run/containerd/containerd.sock, unless NODELET_ARGS says
# otherwise, e.g. NODELET_ARGS='--config /etc/nodelet/nodelet.yaml'; without
# a --config there, it runs with cgroupRoot /nodelet). It
# installs no package and starts or stops no service: the runtime and
# everything else on the machine are left as they are.
#
# Without it, make run installs the Debian packages (hack/install-deps.sh),
# builds the Kubernetes binaries (hack/envtest.sh) and the container runtime
# RUNTIME selects (hack/runtime.sh: containerd2, the default, or
# containerd1.6) and runs hack/localup: a
# local cluster of etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, a private containerd and nodelet, with a demo; with
# NODES=n (n > 1), n nodes, each a network namespace with its own
# containerd and nodelet. make run-down (run.sh down) stops it, also when
# its process was killed.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { echo "==> $*"; }
# progress NAME: turns the "NAME: ..." log lines of a hack script into
# progress lines.
progress() { sed -u -e "s/^$1: /==> /"; }

build_localup() {
	go build -o bin/nodelet-localup ./hack/localup
}

if [[ ${1:-} == down ]]; then
	build_localup
	exec bin/nodelet-localup down
fi

if [[ -n ${KUBECONFIG:-} ]]; then
	step "running nodelet against $KUBECONFIG on this machine's container runtime"
	config=()
	if [[ " ${NODELET_ARGS:-} " != *" --config"* ]]; then
		# Its own pod cgroups (/nodelet/kubepods), never a kubelet's
		# /kubepods on the same machine.
		cfg=$(mktemp -t nodelet-run-XXXXXX.yaml)
		printf 'apiVersion: config.nodelet.io/v1alpha1\nkind: NodeletConfiguration\ncgroupRoot: /nodelet\n' >"$cfg"
		config=(--config "$cfg")
	fi
	# shellcheck disable=SC2086 # NODELET_ARGS is a list of flags.
	exec bin/nodelet --kubeconfig "$KUBECONFIG" "${config[@]}" ${NODELET_ARGS:-}
fi

bash hack/install-deps.sh 2> >(progress install-deps >&2)
assets=$(bash hack/envtest.sh 2> >(progress envtest >&2))
# The container runtime RUNTIME selects (containerd2 by default: built
# into the cache the first time); the local cluster runs it.
bash hack/runtime.sh "${RUNTIME:-containerd2}" 2> >(progress runtime >&2) >/dev/null
step "building the local cluster runner (bin/nodelet-localup)"
build_localup
KUBEBUILDER_ASSETS=$assets exec bin/nodelet-localup
