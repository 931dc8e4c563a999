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
# policy-rc.d, and a daemon that one of the packages this run installed
# started anyway is stopped. Nothing that ran before, nothing of a package
# that was already installed, and nothing in another PID namespace is ever
# stopped, and an install that would remove a package is refused: this
# script may run on a real node (make run), whose containerd is the
# kubelet's.
set -euo pipefail

PACKAGES=(
	containerd                  # containerd 1.6 and ctr, the runtime of RUNTIME=containerd1.6 (pulls runc)
	runc                        # runc 1.1, containerd 1.6's OCI runtime (containerd 2 runs the runc hack/runtime.sh builds)
	containernetworking-plugins # bridge, host-local, portmap, loopback in /usr/lib/cni
	iptables                    # bridge ipMasq and portmap program iptables
	iproute2                    # ip, to remove a CNI bridge left behind
	docker-registry             # distribution 2.8, the local registry
	apache2-utils               # htpasswd -B for the registry's auth file
	busybox-static              # /bin/busybox, the only layer of the test image
	bash-static                 # /bin/bash-static, the shell of the conformance suite's busybox stand-in
	bind9-dnsutils              # dig, for the conformance suite's DNS probes in agnhost and glibc-dns-testing
	libseccomp-dev              # runc's seccomp support, built by hack/runtime.sh (cgo, linked statically)
	pkg-config                  # finds libseccomp for that build
	gcc                         # cgo: that runc build, and make test's unit packages under the race detector
	libc6-dev                   # the C library headers cgo compiles against
	xz-utils                    # compresses the binaries hack/cgroupv2-check.sh carries
	dbus-daemon                 # a private bus for the stand-in systemd-logind of the node shutdown tests
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

# Refuse an install that would remove or replace anything on this machine:
# on a node with Docker's containerd.io, for example, Debian's containerd and
# runc conflict with it, and apt would remove the runtime (and Docker) the
# node runs on.
log "checking what installing ${missing[*]} would change"
"${APT[@]}" update </dev/null >&2
if removals=$("${APT[@]}" install --simulate --no-install-recommends "${missing[@]}" </dev/null 2>/dev/null | grep '^Remv'); then
	log "refusing to install ${missing[*]}: apt would remove packages of this machine:"
	log "$removals"
	log "install the missing packages by hand, or run the tests on a machine without them"
	exit 1
fi

# newly PACKAGE: whether this run installs PACKAGE. Only a package that was
# not installed before can have started a daemon here; the daemons of a
# package that was already installed are the machine's, whenever they
# (re)started.
newly() {
	local p
	for p in "${missing[@]}"; do [[ $p == "$1" ]] && return 0; done
	return 1
}

# start_time PID: the process's start time in clock ticks since boot (field
# 22 of /proc/PID/stat; the command name before it may hold spaces).
start_time() {
	local s
	s=$(<"/proc/$1/stat") || return 1
	s=${s##*) }
	# shellcheck disable=SC2086 # split the fields after the command name.
	set -- $s
	echo "${20}"
}

unit_active() { command -v systemctl >/dev/null && systemctl is-active --quiet "$1" 2>/dev/null; }

before_pids() { pgrep -x "$1" 2>/dev/null | sort || true; }
containerd_before=$(before_pids containerd)
registry_before=$(before_pids docker-registry)
containerd_unit_before=$(unit_active containerd.service && echo active || true)
registry_unit_before=$(unit_active docker-registry.service && echo active || true)
install_start=$(start_time "$BASHPID")
own_pidns=$(readlink /proc/self/ns/pid)

log "installing ${missing[*]}"
"${APT[@]}" install --no-install-recommends "${missing[@]}" </dev/null >&2

# stop_new NAME PACKAGE BINARY UNIT BEFORE_PIDS UNIT_BEFORE: policy-rc.d
# keeps maintainer scripts from starting services; should one have started
# anyway, stop it, and nothing else. Stopped are only daemons of a package
# this run installed: its unit when it was not active before the install,
# else processes named NAME running BINARY that were not running before,
# started after the install began, in this PID namespace (not a node of a
# container-based cluster, not a process of another host's agent).
stop_new() {
	local name=$1 pkg=$2 bin=$3 unit=$4 before=$5 unit_before=$6 pid start
	newly "$pkg" || return 0
	if [[ -z $unit_before ]] && unit_active "$unit"; then
		log "stopping $unit that the $pkg package started"
		systemctl stop "$unit"
		return 0
	fi
	for pid in $(pgrep -x "$name" 2>/dev/null || true); do
		grep -qx "$pid" <<<"$before" && continue
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$bin" ]] || continue
		[[ $(readlink "/proc/$pid/ns/pid" 2>/dev/null) == "$own_pidns" ]] || continue
		start=$(start_time "$pid") || continue
		((start >= install_start)) || continue
		log "stopping $name (pid $pid) that the $pkg package started"
		kill -TERM "$pid" 2>/dev/null || continue
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		# SIGKILL only the same process: its PID may be another's by now.
		if [[ $(start_time "$pid" 2>/dev/null) == "$start" ]]; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
}
stop_new containerd containerd /usr/bin/containerd containerd.service "$containerd_before" "$containerd_unit_before"
stop_new docker-registry docker-registry /usr/bin/docker-registry docker-registry.service "$registry_before" "$registry_unit_before"

# The tests call these by name; fail here rather than in a test.
for b in containerd ctr runc docker-registry htpasswd iptables ip; do
	command -v "$b" >/dev/null || { log "$b is still not on PATH"; exit 1; }
done
for f in /bin/busybox /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/portmap /usr/lib/cni/loopback; do
	[[ -x $f ]] || { log "$f is missing after the install"; exit 1; }
done
log "done"
