#!/usr/bin/env bash
# Builds the base disk image of the cgroup v2 + systemd test VM (make
# e2e-vm) from Debian's packages with debootstrap, into a cache outside the
# work tree, and prints its directory:
#   <dir>/disk.img     ext4 root file system (raw, sparse)
#   <dir>/vmlinuz      the guest's kernel, for qemu -kernel
#   <dir>/initrd.img   its initramfs
#   <dir>/id_ed25519   the key root logs in with over ssh
# The directory's name is a hash of this script, the package list and the
# files under hack/vm/guest: the image is built again only when one of them
# changes (about 10 minutes on 2 cores), a no-op otherwise. Runs write a
# copy-on-write overlay on top (qemu-img create -b), never the image.
#
# What the image has: Debian 12 with systemd as PID 1 (cgroup v2, Debian's
# default), networkd with a fixed address, sshd with the key above, the CNI
# plugins and iptables. The container runtime, nodelet and the test images
# are not in it: each run installs them over ssh from a 9p share, so that a
# change to nodelet never rebuilds the image.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_ROOT="${NODELET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodelet}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
IMAGE_SIZE="${VM_IMAGE_SIZE:-6G}"
# The guest's packages. systemd, systemd-sysv, dbus and udev make systemd
# PID 1; linux-image-amd64 the kernel and its modules (overlay, 9p, bridge,
# netfilter); openssh-server is how the host drives the guest; iptables
# and containernetworking-plugins the pods' bridge network (/usr/lib/cni);
# procps for ps and pkill in checks.
PACKAGES=(systemd systemd-sysv dbus udev linux-image-amd64 iproute2 kmod ca-certificates
	openssh-server iptables containernetworking-plugins procps)

log() { echo "==> $*" >&2; }
elapsed() { echo "$(($(date +%s) - $1))s"; }

key="$(
	{
		cat "${BASH_SOURCE[0]}"
		printf '%s\n' "$SUITE" "$IMAGE_SIZE" "${PACKAGES[@]}"
		find "$HERE/guest" -type f | LC_ALL=C sort | xargs cat
	} | sha256sum | cut -c1-16
)"
OUT="$CACHE_ROOT/vm/base-$key"
if [[ -f $OUT/disk.img && -f $OUT/vmlinuz && -f $OUT/initrd.img && -f $OUT/id_ed25519 ]]; then
	echo "$OUT"
	exit 0
fi

mkdir -p "$CACHE_ROOT/vm"
# One build at a time.
exec 9>"$CACHE_ROOT/vm/build.lock"
flock 9
if [[ -f $OUT/disk.img ]]; then
	echo "$OUT"
	exit 0
fi

start=$(date +%s)
work="$(mktemp -d "$CACHE_ROOT/vm/build-XXXXXX")"
cleanup() {
	# debootstrap leaves /proc and /sys mounted in the root when it fails.
	for m in proc sys dev/pts dev; do umount -l "$work/root/$m" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
root="$work/root"

log "debootstrap $SUITE (${#PACKAGES[@]} packages and their dependencies; several minutes)"
t=$(date +%s)
include="$(
	IFS=,
	echo "${PACKAGES[*]}"
)"
debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
	tail -30 "$work/debootstrap.log" >&2
	exit 1
}
log "debootstrap done in $(elapsed "$t")"

log "configuring the guest"
echo nodelet-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 nodelet-vm\n' >"$root/etc/hosts"
printf 'nameserver 10.253.1.3\n' >"$root/etc/resolv.conf"
printf '/dev/vda / ext4 rw,relatime 0 1\n' >"$root/etc/fstab"
install -D -m 0644 "$HERE/guest/10-vm.network" "$root/etc/systemd/network/10-vm.network"
ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
mkdir -p "$root/etc/systemd/system/sockets.target.wants"
ln -sf /lib/systemd/system/systemd-networkd.socket "$root/etc/systemd/system/sockets.target.wants/systemd-networkd.socket"
# Nothing waits for an "online" network the user network never reports.
ln -sf /dev/null "$root/etc/systemd/system/systemd-networkd-wait-online.service"
# No root password: root logs in with the key only, and on the serial
# console for debugging.
chroot "$root" passwd -d root >/dev/null
ssh-keygen -q -t ed25519 -N '' -C nodelet-vm -f "$work/id_ed25519"
install -D -m 0600 "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
chroot "$root" ssh-keygen -A >/dev/null
printf 'PermitRootLogin prohibit-password\nUseDNS no\n' >"$root/etc/ssh/sshd_config.d/vm.conf"
mkdir -p "$root/mnt/host"
# The kernel and initrd boot from the host (qemu -kernel/-initrd); the
# guest's own copies stay for its modules' sake.
cp "$root"/boot/vmlinuz-* "$work/vmlinuz"
cp "$root"/boot/initrd.img-* "$work/initrd.img"
# Space debootstrap's apt cache takes in the image for nothing.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

log "making the disk image ($IMAGE_SIZE, ext4)"
t=$(date +%s)
mkfs.ext4 -q -F -L nodelet-vm -d "$root" "$work/disk.img" "$IMAGE_SIZE"
log "disk image done in $(elapsed "$t")"

mkdir -p "$OUT"
mv "$work/id_ed25519" "$work/id_ed25519.pub" "$work/vmlinuz" "$work/initrd.img" "$OUT/"
mv "$work/disk.img" "$OUT/disk.img"
log "base image $OUT built in $(elapsed "$start")"
echo "$OUT"
