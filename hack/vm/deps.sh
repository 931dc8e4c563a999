#!/usr/bin/env bash
# Installs the Debian packages the cgroup v2 + systemd test VM needs on the
# host (make e2e-vm): qemu (software emulation; no KVM needed), qemu-img,
# debootstrap and an ssh client. Idempotent; none of them runs a service.
# Kept apart from hack/install-deps.sh: make test does not need them.
set -euo pipefail

packages=(qemu-system-x86 qemu-utils debootstrap openssh-client e2fsprogs)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
	exit 0
fi
echo "==> installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
