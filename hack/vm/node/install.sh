#!/usr/bin/env bash
# Runs in the test VM as root: installs containerd 2 and runc, imports the
# test images, and installs nodelet as docs/kubeadm.md tells an operator
# (config/host's unit and kubeadm drop-in, systemctl enable --now), all
# from the host's read-only 9p share, which test/vm lays out:
#   runtime/   containerd, containerd-shim-runc-v2, ctr, runc
#   images/    OCI archives of the test images (pause first)
#   files/     hack/vm/node: this script, containerd's configuration and
#              unit, the pods' CNI network
#   host/      config/host
#   node/      config.yaml (KubeletConfiguration), bootstrap-kubelet.conf,
#              ca.crt (the client CA of the node API)
#   nodelet    bin/nodelet
set -euo pipefail

share=/mnt/host
mkdir -p "$share"
mountpoint -q "$share" || mount -t 9p -o trans=virtio,version=9p2000.L,ro host "$share"

echo "==> containerd and runc"
install -m 0755 "$share"/runtime/{containerd,containerd-shim-runc-v2,ctr,runc} /usr/local/bin/
install -D -m 0644 "$share/files/containerd.toml" /etc/containerd/config.toml
install -D -m 0644 "$share/files/10-pods.conflist" /etc/cni/net.d/10-pods.conflist
install -m 0644 "$share/files/containerd.service" /etc/systemd/system/containerd.service
systemctl daemon-reload
systemctl enable --now containerd
for _ in $(seq 60); do ctr version >/dev/null 2>&1 && break; sleep 1; done
for archive in "$share"/images/*.tar; do
	ctr -n k8s.io images import --all-platforms --snapshotter overlayfs "$archive" >/dev/null
done

echo "==> nodelet"
install -m 0755 "$share/nodelet" /usr/local/bin/nodelet
install -m 0644 "$share/host/nodelet.service" /etc/systemd/system/nodelet.service
install -d /etc/systemd/system/nodelet.service.d
install -m 0644 "$share/host/10-kubeadm.conf" /etc/systemd/system/nodelet.service.d/10-kubeadm.conf
install -D -m 0644 "$share/node/config.yaml" /var/lib/kubelet/config.yaml
install -D -m 0600 "$share/node/bootstrap-kubelet.conf" /etc/kubernetes/bootstrap-kubelet.conf
install -D -m 0644 "$share/node/ca.crt" /etc/kubernetes/pki/ca.crt
systemctl daemon-reload
systemctl enable --now nodelet
