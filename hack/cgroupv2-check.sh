#!/usr/bin/env bash
# Checks nodelet on a real cgroup v2 host that has no Go, no container
# runtime and no network: the host the project's Linux machines are not.
#
#   hack/cgroupv2-check.sh bundle [DIR]   on a build machine: makes DIR
#   hack/cgroupv2-check.sh run [DIR]      on the cgroup v2 host, as root
#
# bundle builds (or takes from the cache) nodelet, containerd 2 and runc
# (hack/runtime.sh), crictl, and the test images, takes the bridge,
# host-local and loopback CNI plugins of this machine, and writes them
# xz-compressed into DIR (default .cache/cgroupv2-check, about 45 MiB):
# copy the work tree with DIR to the host.
#
# run unpacks DIR into a directory of its own under /tmp, starts containerd
# (its own root, state and socket; cgroupfs driver, restrict_oom_score_adj)
# and nodelet standalone (no API server) with static pods of each QoS
# class, and reads back from the cgroup v2 files: the kubepods tree and
# every pod's memory.max, cpu.max, cpu.weight and pids.max against what the
# pod asks for; a container past its memory limit OOM-killed (reason
# OOMKilled, oom_kill in memory.events) and restarted; a fork past
# podPidsLimit failing with EAGAIN in that pod alone (pids.events); PSI
# files; nodelet stopped leaving every container running and started again
# adopting them (same IDs, no new container); the pods' cgroups gone when
# their manifests are. Prints one line per check (ok / FAIL), and exits 1
# when a check failed. Everything it started is stopped and removed at the
# end; with $OUT set (a directory), the logs are copied there.
# CGROUPV2_CHECK_ANY_CGROUP=1 runs it on a cgroup v1 host too, where the
# cgroup file checks fail but everything else is tried: a rehearsal.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-}
DIR=${2:-$ROOT/.cache/cgroupv2-check}
CRICTL_VERSION=${CRICTL_VERSION:-1.37.0}
CNI_PLUGINS=(bridge host-local loopback)
CNI_DIR=${CNI_DIR:-/usr/lib/cni}

log() { echo "==> $*" >&2; }
die() {
	echo "cgroupv2-check: $*" >&2
	exit 1
}

bundle() {
	local cache runtime crictl_dir b
	cd "$ROOT"
	cache="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
	command -v xz >/dev/null || die "xz is missing: run hack/install-deps.sh"
	mkdir -p "$DIR/bin" "$DIR/cni" "$DIR/images"

	# Without the symbol table and DWARF: the bundle must fit in what the
	# host is sent (the work tree and the bundle, 64 MiB in all).
	log "building nodelet"
	CGO_ENABLED=0 go build -tags grpcnotrace -ldflags "-s -w -X github.com/nodelet/nodelet/internal/version.Version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" \
		-o "$DIR/nodelet" ./cmd >&2

	log "building containerd 2 and runc (hack/runtime.sh)"
	runtime=$(bash hack/runtime.sh containerd2)

	crictl_dir="$cache/crictl-$CRICTL_VERSION"
	if [[ ! -x $crictl_dir/crictl ]]; then
		log "building crictl v$CRICTL_VERSION"
		mkdir -p "$cache/build/crictl-$CRICTL_VERSION" "$crictl_dir"
		(
			cd "$cache/build/crictl-$CRICTL_VERSION"
			export GOFLAGS="-buildvcs=false -mod=mod" CGO_ENABLED=0
			[[ -f go.mod ]] || go mod init nodelet.local/crictl >/dev/null 2>&1
			go get -tool "sigs.k8s.io/cri-tools/cmd/crictl@v$CRICTL_VERSION" >&2
			go build -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=v$CRICTL_VERSION" \
				-o "$crictl_dir/crictl.tmp" sigs.k8s.io/cri-tools/cmd/crictl >&2
			mv "$crictl_dir/crictl.tmp" "$crictl_dir/crictl"
		)
	fi

	log "compressing the binaries into $DIR"
	pack() { # pack SRC NAME: SRC xz-compressed as DIR/NAME.xz, when changed.
		local src=$1 dst=$DIR/$2.xz
		[[ -e $dst && $dst -nt $src ]] && return 0
		xz -T0 -9 -c "$src" >"$dst.tmp"
		mv "$dst.tmp" "$dst"
	}
	pack "$DIR/nodelet" bin/nodelet
	rm -f "$DIR/nodelet"
	for b in containerd containerd-shim-runc-v2 ctr runc; do
		pack "$(readlink -f "$runtime/$b")" "bin/$b"
	done
	pack "$crictl_dir/crictl" bin/crictl
	for b in "${CNI_PLUGINS[@]}"; do
		[[ -x $CNI_DIR/$b ]] || die "$CNI_DIR/$b is missing: run hack/install-deps.sh"
		pack "$CNI_DIR/$b" "cni/$b"
	done

	log "writing the test images"
	CGO_ENABLED=0 go run ./hack/testimages -o "$DIR/images" nodelet.test/pause:1.0 nodelet.test/busybox:1.35 >/dev/null
	du -sh "$DIR" >&2
	echo "$DIR"
}

# ---- run: on the cgroup v2 host ----

FAILED=0
ok() { echo "ok   $*"; }
fail() {
	echo "FAIL $*"
	FAILED=1
}
# check NAME WANT GOT: ok when equal.
check() {
	if [[ $2 == "$3" ]]; then ok "$1: $3"; else fail "$1: got '$3', want '$2'"; fi
}

# weight SHARES: cgroup v2 cpu.weight for cgroup v1 cpu.shares, by the
# quadratic mapping of runc and the cgroups library (shares 2 → 1,
# 1024 → 100, 262144 → 10000).
weight() {
	python3 -c 'import math,sys
s=int(sys.argv[1])
if s<=2: print(1)
elif s>=262144: print(10000)
else:
    l=math.log2(s); print(math.ceil(10**((l*l+125*l)/612.0-7.0/34.0)))' "$1"
}

# shares MILLICPU: the kubelet's cpu.shares of a CPU request.
shares() { local s=$(($1 * 1024 / 1000)); ((s < 2)) && s=2; echo $s; }

run_check() {
	[[ $(id -u) -eq 0 ]] || die "run needs root"
	[[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs || -n ${CGROUPV2_CHECK_ANY_CGROUP:-} ]] || die "/sys/fs/cgroup is not cgroup v2 ($(stat -fc %T /sys/fs/cgroup))"
	[[ -d $DIR/bin ]] || die "no bundle in $DIR: run '$0 bundle' on a build machine first"
	command -v python3 >/dev/null || die "python3 is needed"

	W=$(mktemp -d /tmp/nodelet-cgv2-XXXXXX)
	chmod 0755 "$W"
	CG_ROOT=/nodelet-cgv2-check
	SOCK=$W/containerd.sock
	NODELET_PID=""
	CONTAINERD_PID=""
	trap cleanup EXIT

	log "host: $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME"), $(nproc) CPUs, PID 1 $(cat /proc/1/comm)"
	log "root cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
	log "unpacking into $W"
	mkdir -p "$W/bin" "$W/cni/bin" "$W/cni/net.d" "$W/manifests" "$W/logs"
	local f
	for f in "$DIR"/bin/*.xz; do xz -dc "$f" >"$W/bin/$(basename "$f" .xz)"; done
	for f in "$DIR"/cni/*.xz; do xz -dc "$f" >"$W/cni/bin/$(basename "$f" .xz)"; done
	chmod 0755 "$W"/bin/* "$W"/cni/bin/*
	export PATH=$W/bin:$PATH
	log "runc: $(runc --version | head -1); containerd: $(containerd --version)"

	cat >"$W/containerd.toml" <<EOF
version = 3
root = "$W/root"
state = "$W/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$SOCK"
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # Hosts that withhold CAP_SYS_RESOURCE cannot lower oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$W/bin/runc"
        Root = "$W/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$W/cni/bin"]
    conf_dir = "$W/cni/net.d"
    max_conf_num = 1
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "nodelet.test/pause:1.0"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF
	cat >"$W/cni/net.d/10-cgv2.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "cgv2", "plugins": [{"type": "bridge", "bridge": "nlcgv2", "isGateway": true, "ipMasq": false,
 "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.251.77.0/24"}]], "dataDir": "$W/cni/ipam"}}]}
EOF

	log "starting containerd"
	local t0
	t0=$(date +%s.%N)
	containerd --config "$W/containerd.toml" >"$W/logs/containerd.log" 2>&1 &
	CONTAINERD_PID=$!
	printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 10\n' "$SOCK" "$SOCK" >"$W/crictl.yaml"
	export CRI_CONFIG_FILE=$W/crictl.yaml
	wait_for 30 "the CRI to answer" crictl info
	for f in "$DIR"/images/*.tar; do ctr --address "$SOCK" -n k8s.io images import "$f" >/dev/null; done
	crictl images

	write_pods
	write_nodelet_config
	start_nodelet
	wait_for 120 "5 pods running a container" all_running
	log "pods running $(python3 -c "import sys; print(round(float(sys.argv[2])-float(sys.argv[1]),1))" "$t0" "$(date +%s.%N)") s after containerd was started"
	crictl pods
	crictl ps -a

	check_tree
	check_pods
	check_oom
	check_pids
	check_psi
	check_adoption
	check_removal

	log "nodelet peak RSS: $(grep VmHWM /proc/"$NODELET_PID"/status | awk '{print $2/1024 " MiB"}')"
	if grep -E '"level":"error"|^E[0-9]{4} ' "$W/logs/nodelet.log" | head -20; then
		log "nodelet logged the errors above"
	else
		ok "nodelet logged no error"
	fi
	if ((FAILED)); then log "FAILED"; exit 1; fi
	log "all checks passed"
}

wait_for() { # wait_for SECONDS WHAT CMD...: until CMD succeeds.
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 2; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	fail "waiting ${secs}s for $what"
	dump
	exit 1
}

dump() {
	log "last lines of nodelet's log"
	tail -40 "$W/logs/nodelet.log" 2>/dev/null || true
	log "last lines of containerd's log"
	tail -20 "$W/logs/containerd.log" 2>/dev/null || true
}

write_pods() {
	cat >"$W/manifests/guaranteed.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: guaranteed}
spec:
  containers:
  - name: c
    image: nodelet.test/busybox:1.35
    command: [sleep, "3600"]
    resources: {limits: {cpu: 200m, memory: 64Mi}}
EOF
	cat >"$W/manifests/burstable.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: burstable}
spec:
  containers:
  - name: c
    image: nodelet.test/busybox:1.35
    command: [sleep, "3600"]
    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 128Mi}}
EOF
	cat >"$W/manifests/besteffort.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: besteffort}
spec:
  containers:
  - name: c
    image: nodelet.test/busybox:1.35
    command: [sleep, "3600"]
EOF
	# 64 MiB held in a shell variable, against a 32Mi limit.
	cat >"$W/manifests/oom.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: oom}
spec:
  containers:
  - name: hog
    image: nodelet.test/busybox:1.35
    command: [sh, -c, 'sleep 2; x=$(head -c 67108864 /dev/zero | tr "\0" a); echo survived; sleep 3600']
    resources: {limits: {memory: 32Mi}}
EOF
	# 40 background sleeps against podPidsLimit 20 (the pause process and
	# the shells count too). The inner shell exits when a fork fails; the
	# outer one then execs its sleep, which needs no fork.
	cat >"$W/manifests/pids.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: pids}
spec:
  containers:
  - name: forker
    image: nodelet.test/busybox:1.35
    command: [sh, -c, 'sh -c "for i in \$(seq 40); do sleep 3600 & done" 2>&1; echo forked; exec sleep 3600']
EOF
}

write_nodelet_config() {
	cat >"$W/nodelet.yaml" <<EOF
apiVersion: config.nodelet.io/v1alpha1
kind: NodeletConfiguration
nodeName: cgv2-check
containerRuntimeEndpoint: unix://$SOCK
rootDir: $W/nodelet
podLogsDir: $W/pod-logs
containerLogLinksDir: ""
staticPodPath: $W/manifests
fileCheckFrequency: 2s
cgroupDriver: cgroupfs
cgroupRoot: $CG_ROOT
podPidsLimit: 20
# The check is about cgroups, not the swap policy: run on a host with swap.
failSwapOn: false
resolvConf: ""
server: {port: 0}
healthzBindAddress: 127.0.0.1:10348
metricsBindAddress: 127.0.0.1:10349
EOF
}

start_nodelet() {
	log "starting nodelet standalone"
	env -u KUBECONFIG nodelet --config "$W/nodelet.yaml" >>"$W/logs/nodelet.log" 2>&1 &
	NODELET_PID=$!
}

# running NAME: the ID of pod NAME's running container.
running() { crictl ps -q --state running --label "io.kubernetes.pod.name=$1-cgv2-check" | head -1; }
all_running() {
	local p
	for p in guaranteed burstable besteffort pids; do [[ -n $(running "$p") ]] || return 1; done
	[[ -n $(crictl ps -aq --label io.kubernetes.pod.name=oom-cgv2-check) ]]
}
pod_uid() { crictl pods -q --name "^$1-cgv2-check\$" --state ready | head -1 | xargs -r crictl inspectp -o go-template --template '{{.status.metadata.uid}}'; }
cg() { cat "/sys/fs/cgroup$1/$2" 2>/dev/null || echo "<missing $1/$2>"; }

check_tree() {
	local kp=$CG_ROOT/kubepods mem
	mem=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024))
	check "kubepods memory.max is the node's memory (no reservations)" "$mem" "$(cg $kp memory.max)"
	check "kubepods cpu.weight is the capacity's shares ($(nproc) CPUs)" "$(weight $(($(nproc) * 1024)))" "$(cg $kp cpu.weight)"
	check "besteffort cpu.weight (shares 2)" 1 "$(cg $kp/besteffort cpu.weight)"
	# Burstable QoS shares: the CPU requests of its pods (burstable 100m;
	# oom asks for memory only).
	check "burstable cpu.weight (the CPU requests of its pods: 100m)" "$(weight "$(shares 100)")" "$(cg $kp/burstable cpu.weight)"
	local subtree
	subtree=$(cg $kp cgroup.subtree_control)
	for c in cpu memory pids; do
		[[ " $subtree " == *" $c "* ]] && ok "kubepods delegates $c" || fail "kubepods cgroup.subtree_control lacks $c: $subtree"
	done
}

check_pods() {
	local kp=$CG_ROOT/kubepods uid pg c
	uid=$(pod_uid guaranteed)
	pg=$kp/pod$uid
	check "guaranteed pod memory.max" 67108864 "$(cg "$pg" memory.max)"
	check "guaranteed pod cpu.max" "20000 100000" "$(cg "$pg" cpu.max)"
	check "guaranteed pod cpu.weight (200m)" "$(weight "$(shares 200)")" "$(cg "$pg" cpu.weight)"
	check "guaranteed pod pids.max" 20 "$(cg "$pg" pids.max)"
	c=$(running guaranteed)
	check "guaranteed container memory.max" 67108864 "$(cg "$pg/$c" memory.max)"
	check "guaranteed container cpu.max" "20000 100000" "$(cg "$pg/$c" cpu.max)"
	check "guaranteed container's process is in its cgroup" "0::$pg/$c" "$(cat /proc/"$(crictl inspect -o go-template --template '{{.info.pid}}' "$c")"/cgroup)"

	uid=$(pod_uid burstable)
	pg=$kp/burstable/pod$uid
	check "burstable pod memory.max" 134217728 "$(cg "$pg" memory.max)"
	check "burstable pod cpu.max (no CPU limit)" "max 100000" "$(cg "$pg" cpu.max)"
	check "burstable pod cpu.weight (100m)" "$(weight "$(shares 100)")" "$(cg "$pg" cpu.weight)"
	check "burstable pod pids.max" 20 "$(cg "$pg" pids.max)"

	uid=$(pod_uid besteffort)
	pg=$kp/besteffort/pod$uid
	check "besteffort pod memory.max" max "$(cg "$pg" memory.max)"
	check "besteffort pod cpu.weight (shares 2)" 1 "$(cg "$pg" cpu.weight)"
	check "besteffort pod pids.max" 20 "$(cg "$pg" pids.max)"
}

oom_killed() { # the ID of an exited hog container whose reason is OOMKilled
	local id
	for id in $(crictl ps -aq --state exited --label io.kubernetes.pod.name=oom-cgv2-check); do
		[[ $(crictl inspect -o go-template --template '{{.status.reason}}' "$id") == OOMKilled ]] && { echo "$id"; return 0; }
	done
	return 1
}

check_oom() {
	local id uid pg events
	for ((i = 0; i < 120; i++)); do id=$(oom_killed) && break; sleep 0.5; done
	if [[ -z ${id:-} ]]; then
		fail "no hog container exited OOMKilled"
		crictl ps -a --label io.kubernetes.pod.name=oom-cgv2-check
		return
	fi
	ok "hog container $id exited with reason OOMKilled, exit code $(crictl inspect -o go-template --template '{{.status.exitCode}}' "$id")"
	uid=$(crictl inspect -o go-template --template '{{index .status.labels "io.kubernetes.pod.uid"}}' "$id")
	pg=$CG_ROOT/kubepods/burstable/pod$uid
	check "oom pod memory.max" 33554432 "$(cg "$pg" memory.max)"
	events=$(awk '$1 == "oom_kill" {print $2}' "/sys/fs/cgroup$pg/memory.events" 2>/dev/null || true)
	((${events:-0} >= 1)) && ok "oom pod memory.events oom_kill $events" || fail "oom pod memory.events oom_kill is ${events:-missing}"
	wait_for 60 "the hog container to be started again" bash -c "[[ \$(crictl ps -aq --label io.kubernetes.pod.name=oom-cgv2-check | wc -l) -ge 2 ]]"
	ok "hog restarted: $(crictl ps -a --label io.kubernetes.pod.name=oom-cgv2-check -o json |
		python3 -c 'import json,sys; print("; ".join("attempt %d %s" % (c["metadata"]["attempt"], c["state"]) for c in json.load(sys.stdin)["containers"]))')"
}

check_pids() {
	local c uid pg logs max events
	c=$(running pids)
	uid=$(pod_uid pids)
	pg=$CG_ROOT/kubepods/besteffort/pod$uid
	max=$(cg "$pg" pids.max)
	check "pids pod pids.max" 20 "$max"
	for ((i = 0; i < 20; i++)); do
		logs=$(crictl logs "$c" 2>&1)
		[[ $logs == *forked* ]] && break
		sleep 0.5
	done
	if grep -qiE "can't fork|resource temporarily unavailable" <<<"$logs"; then
		ok "a fork past podPidsLimit failed with EAGAIN: $(grep -m1 -iE "can't fork|resource temporarily unavailable" <<<"$logs")"
	else
		fail "no fork failed in the pids pod: $(head -c 300 <<<"$logs")"
	fi
	local cur
	cur=$(cg "$pg" pids.current)
	[[ $cur =~ ^[0-9]+$ ]] && ((cur >= 18 && cur <= 20)) && ok "pids pod pids.current $cur (at most pids.max)" || fail "pids pod pids.current is $cur"
	events=$(awk '$1 == "max" {print $2}' "/sys/fs/cgroup$pg/pids.events" 2>/dev/null || true)
	((${events:-0} >= 1)) && ok "pids pod pids.events max $events" || fail "pids pod pids.events max is ${events:-missing}"
	# The other pods forked nothing in vain.
	uid=$(pod_uid besteffort)
	check "besteffort pod pids.events max (untouched)" 0 "$(awk '$1 == "max" {print $2}' "/sys/fs/cgroup$CG_ROOT/kubepods/besteffort/pod$uid/pids.events")"
}

check_psi() {
	local uid pg f
	uid=$(pod_uid guaranteed)
	pg=$CG_ROOT/kubepods/pod$uid
	for f in cpu.pressure memory.pressure io.pressure; do
		if [[ -r /sys/fs/cgroup$pg/$f ]]; then ok "pod $f: $(head -1 "/sys/fs/cgroup$pg/$f")"; else fail "pod $f is missing"; fi
	done
	[[ -r /proc/pressure/memory ]] && ok "node /proc/pressure/memory: $(head -1 /proc/pressure/memory)" || fail "/proc/pressure/memory is missing"
}

ids() { crictl ps -aq | sort; }

check_adoption() {
	local before after
	before=$(ids)
	log "stopping nodelet (SIGTERM)"
	kill -TERM "$NODELET_PID"
	wait "$NODELET_PID" || true
	sleep 3
	local p
	for p in guaranteed burstable besteffort pids; do
		[[ -n $(running "$p") ]] && ok "$p still running with nodelet stopped" || fail "$p stopped with nodelet"
	done
	log "starting nodelet again"
	start_nodelet
	wait_for 30 "nodelet's health check" python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:10348/healthz", timeout=1)'
	sleep 10
	after=$(ids)
	# The hog may have been OOM-killed and restarted in the meantime: that
	# is its own doing, compare the others.
	local others_before others_after
	others_before=$(for p in guaranteed burstable besteffort pids; do crictl ps -aq --label "io.kubernetes.pod.name=$p-cgv2-check"; done | sort)
	others_after=$(for p in guaranteed burstable besteffort pids; do running "$p"; done | sort)
	check "containers adopted after a restart (same IDs, all running)" "$others_before" "$others_after"
	[[ -n $after ]] || fail "no container after the restart"
}

check_removal() {
	local uid pg p
	declare -A pgs
	for p in guaranteed burstable besteffort; do
		uid=$(pod_uid $p)
		case $p in
		guaranteed) pgs[$p]=$CG_ROOT/kubepods/pod$uid ;;
		*) pgs[$p]=$CG_ROOT/kubepods/$p/pod$uid ;;
		esac
	done
	log "removing the manifests"
	rm -f "$W"/manifests/*.yaml
	wait_for 90 "every pod stopped" bash -c '[[ -z $(crictl pods -q --state ready) && -z $(crictl ps -q) ]]'
	ok "every pod stopped"
	for p in "${!pgs[@]}"; do
		for ((i = 0; i < 20; i++)); do [[ -d /sys/fs/cgroup${pgs[$p]} ]] || break; sleep 0.5; done
		[[ -d /sys/fs/cgroup${pgs[$p]} ]] && fail "$p pod cgroup ${pgs[$p]} left behind" || ok "$p pod cgroup removed"
	done
}

cleanup() {
	local rc=$?
	set +e
	if [[ -n ${OUT:-} && -d ${OUT:-} ]]; then cp -r "$W/logs" "$OUT/cgroupv2-check-logs" 2>/dev/null; fi
	if [[ -n $NODELET_PID ]]; then kill -TERM "$NODELET_PID" 2>/dev/null && wait "$NODELET_PID" 2>/dev/null; fi
	if [[ -n $CONTAINERD_PID ]] && kill -0 "$CONTAINERD_PID" 2>/dev/null; then
		for id in $(crictl pods -q 2>/dev/null); do crictl stopp "$id" >/dev/null 2>&1; crictl rmp -f "$id" >/dev/null 2>&1; done
		kill -TERM "$CONTAINERD_PID"
		wait "$CONTAINERD_PID" 2>/dev/null
	fi
	pkill -f "containerd-shim-runc-v2 .*-address $SOCK" 2>/dev/null
	# What runc left: processes first, then the cgroups, deepest first.
	if [[ -d /sys/fs/cgroup$CG_ROOT ]]; then
		find "/sys/fs/cgroup$CG_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		sleep 1
		find "/sys/fs/cgroup$CG_ROOT" -depth -type d -exec rmdir {} \; 2>/dev/null
	fi
	ip link delete nlcgv2 2>/dev/null
	grep " $W/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	rm -rf "$W"
	exit "$rc"
}

case $MODE in
bundle) bundle ;;
run) run_check ;;
*) die "usage: $0 bundle|run [DIR]" ;;
esac
