// Package vm runs nodelet on a cgroup v2 host whose PID 1 is systemd: a
// Debian 12 virtual machine (hack/vm/image.sh builds its disk from Debian's
// packages with debootstrap) booted under qemu with software emulation, so
// that no KVM is needed. Inside it containerd 2 and runc run with the
// systemd cgroup driver, and nodelet is installed as an operator installs
// it on a kubeadm node (config/host's unit and drop-in, `systemctl enable
// --now nodelet`, cgroupDriver: systemd) and joins an API server on the
// host by TLS bootstrap.
//
// The specs (make e2e-vm) check what a cgroup v1 machine without systemd
// cannot: the pods' slices under kubepods.slice and their limits in the v2
// files, an OOM kill, the node API through the API server, a restart and a
// stop of nodelet.service that keep the pods running, and memory-pressure
// eviction. They run only with NODELET_E2E_VM=1; without it `go test`
// runs the unit tests of the pure helpers here (the qemu command line, the
// node's configuration, the names and values of the v2 cgroup files) and
// skips the suite.
//
// Networking: qemu's user network gives the guest 10.253.1.15. The host
// holds two addresses on a link of its own (a bridge without ports) for the run: the API server's
// (10.253.0.1, which the guest reaches through qemu's NAT) and the
// guest's own, on which qemu forwards the node API's port into the guest,
// so that the API server reaches the Node's InternalIP for kubectl logs,
// exec and the stats proxy as it would on a real network. (The host's
// connections to GuestIP leave from APIServerIP: qemu passes their source
// address on, and the guest drops packets from its own.)
package vm
