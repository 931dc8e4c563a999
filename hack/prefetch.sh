#!/usr/bin/env bash
# Starts, in the background and at low priority, the builds that the e2e and
# conformance suites otherwise start on first use: the conformance binaries
# (e2e.test, ginkgo, the kubelet, agnhost), the CSI sidecars, kube-proxy and
# CoreDNS. On a machine with empty caches a first `make test` then overlaps
# them with its lint and unit tests instead of its e2e specs. Each script is
# a no-op when its binaries are cached and takes its own lock, so a suite that
# needs a binary waits for the build in progress instead of starting another.
# Returns at once; the builds' output goes to bin/prefetch.log.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
# Two prefetches at once would only queue on the scripts' locks.
exec 9>bin/.prefetch.lock
flock -n 9 || exit 0
(
	for script in conformance.sh csi.sh kube-proxy.sh coredns.sh; do
		nice -n 10 bash "hack/$script" >/dev/null || echo "prefetch: hack/$script failed; the suite that needs it builds it again" >&2
	done
) >bin/prefetch.log 2>&1 </dev/null &
