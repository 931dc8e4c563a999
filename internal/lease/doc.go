// Package lease keeps a node's heartbeat Lease (kube-node-lease/<node>)
// renewed, as the kubelet's node lease controller does: the holder is the
// node, the lease is renewed every quarter of its duration and owned by the
// Node object once that exists. Leases are read and written directly (a
// node may not list or watch them) and API errors are retried with a capped
// exponential back-off; the controller never gives up and never exits
// before its context ends.
package lease
