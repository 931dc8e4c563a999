#!/usr/bin/env bash
# Runs a command where cgroup v1 has a hugetlb hierarchy, on a cgroup v1
# host that leaves the hugetlb controller to its v2 hierarchy (as Debian
# 12 machines of this kind do): there no v1 cgroup can bound huge pages,
# and the specs that read them back skip. As root:
#
#   hack/hugetlb-v1.sh go test ./test/e2e/ -ginkgo.focus='Memory cgroups'
#
# The command runs in a private mount namespace whose /sys/fs/cgroup has
# the host's v1 hierarchies and v2 one mounted again, plus hugetlb, so
# that it and its children (containerd, runc, nodelet) see hugetlb and
# nothing outside does. While it runs the kernel binds hugetlb to the v1
# hierarchy (it leaves the v2 root's cgroup.controllers); the cgroups
# left under it are removed and it is unmounted after, which gives it
# back. It refuses when hugetlb is in use in v2 or already mounted.
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 command [args...]" >&2
	exit 2
fi
if [[ "${NODELET_HUGETLB_NS:-}" != 1 ]]; then
	if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
		echo "$0: this host runs cgroup v2 alone: run the command as it is" >&2
		exit 2
	fi
	if grep -qw hugetlb /proc/self/mountinfo; then
		echo "$0: hugetlb is mounted already: run the command as it is" >&2
		exit 2
	fi
	if grep -qw hugetlb /sys/fs/cgroup/unified/cgroup.subtree_control 2>/dev/null; then
		echo "$0: the v2 hierarchy uses hugetlb: refusing to take it" >&2
		exit 1
	fi
	NODELET_HUGETLB_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi

# mount point, file system type and super options of each cgroup mount
mounts=$(awk -F' - ' '{split($1, a, " "); split($2, b, " "); if (b[1] == "cgroup" || b[1] == "cgroup2") print a[5], b[1], b[3]}' /proc/self/mountinfo)
controllers=$(awk 'NR > 1 {print $1}' /proc/cgroups)
mount -t tmpfs -o mode=755 nodelet-cgroups /sys/fs/cgroup
while read -r point fstype opts; do
	[[ "$point" == /sys/fs/cgroup/* ]] || continue
	mkdir -p "$point"
	if [[ "$fstype" == cgroup2 ]]; then
		mount -t cgroup2 cgroup2 "$point"
	else
		# The super options name the controllers (and name=systemd).
		sel=$(tr "," "\n" <<<"$opts" | { grep -xF -e "$controllers" || true; } | paste -sd, -)
		name=$(tr ',' '\n' <<<"$opts" | grep '^name=' || true)
		if [[ -n "$name" ]]; then
			sel=$(paste -sd, - <<<"none
$name")
		fi
		mount -t cgroup -o "$sel" cgroup "$point"
	fi
done <<<"$mounts"
mkdir /sys/fs/cgroup/hugetlb
mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb

rc=0
"$@" || rc=$?
find /sys/fs/cgroup/hugetlb -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true
left=$(find /sys/fs/cgroup/hugetlb -mindepth 1 -type d | wc -l)
umount /sys/fs/cgroup/hugetlb
if [[ "$left" -gt 0 ]]; then
	echo "$0: $left hugetlb cgroups could not be removed: hugetlb stays bound to cgroup v1 until they are" >&2
fi
exit "$rc"
