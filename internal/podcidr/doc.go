// Package podcidr hands the node's pod CIDRs to the container runtime, as
// the kubelet does: the Node's spec.podCIDRs (else spec.podCIDR), or the
// configured podCIDR while the Node has none, go to the runtime with CRI
// UpdateRuntimeConfig, comma-separated. A runtime that writes its own CNI
// configuration from them (containerd's conf_template) reports its network
// not ready until then. A value is sent once; again only when it changes,
// or after a restart of this process (the runtime may have restarted too).
// The decision is the pure ShouldSend; Updater keeps what was sent.
package podcidr
