#!/usr/bin/env bash
# Installs the Debian packages that the integration and e2e tests (and a local
# run) need: a container runtime that the tests start privately, CNI plugins,
# a registry with htpasswd auth, and the busybox binary the test image is made
# of. Idempotent: nothing is fetched when every package is already installed.
# Works as root with no terminal and no standard input (CI=true).
#
# The packages must never leave a service running: the tests start their own
# containerd and registry with private sockets, ports and state, and a system
# one would only get in the way. Services are kept from starting with
# policy-rc.d and any daemon the install started anyway is stopped.
set -euo pipefail

PACKAGES=(
	containerd                  # containerd 1.6 and ctr (pulls runc)
	runc                        # the OCI runtime the CRI plugin runs
	containernetworking-plugins # bridge, host-local, portmap, loopback in /usr/lib/cni
	iptables                    # bridge ipMasq and portmap program iptables
	iproute2                    # ip, to remove a CNI bridge left behind
	docker-registry             # distribution 2.8, the local registry
	apache2-utils               # htpasswd -B for the registry's auth file
	busybox-static              # /bin/busybox, the only layer of the test image
	bash-static                 # /bin/bash-static, the shell of the conformance suite's busybox stand-in
)

log() { echo "install-deps: $*" >&2; }

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed$'; then
		missing+=("$p")
	fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
	log "these packages are missing and installing them needs root: ${missing[*]}"
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# Keep maintainer scripts from starting services (invoke-rc.d asks policy-rc.d).
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi

# Daemons running before the install are someone else's; only new ones that
# use the system-wide defaults are the packages' doing.
before_pids() { pgrep -x "$1" 2>/dev/null | sort || true; }
containerd_before=$(before_pids containerd)
registry_before=$(before_pids docker-registry)

log "installing ${missing[*]}"
"${APT[@]}" update </dev/null >&2
"${APT[@]}" install --no-install-recommends "${missing[@]}" </dev/null >&2

# stop_new NAME BEFORE DEFAULT_MARKER: stops processes named NAME that were not
# running before the install and run with the package's default settings
# (no private socket or config of a test).
stop_new() {
	local name=$1 before=$2 pid args
	for pid in $(pgrep -x "$name" 2>/dev/null || true); do
		grep -qx "$pid" <<<"$before" && continue
		args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
		case "$name" in
		containerd)
			# A test's containerd always has --address; the system one does not
			# or uses the default socket.
			if [[ $args == *"--address"* && $args != *"/run/containerd/containerd.sock"* ]]; then continue; fi
			;;
		docker-registry)
			if [[ -n $args && $args != *"/etc/docker/registry/"* ]]; then continue; fi
			;;
		esac
		log "stopping $name (pid $pid) that the package started"
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
}
stop_new containerd "$containerd_before"
stop_new docker-registry "$registry_before"

# The tests call these by name; fail here rather than in a test.
for b in containerd ctr runc docker-registry htpasswd iptables ip; do
	command -v "$b" >/dev/null || { log "$b is still not on PATH"; exit 1; }
done
for f in /bin/busybox /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/portmap /usr/lib/cni/loopback; do
	[[ -x $f ]] || { log "$f is missing after the install"; exit 1; }
done
log "done"
