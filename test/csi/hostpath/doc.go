// Package hostpath is a small CSI driver for tests: its volumes are
// directories under a state directory on the one node it serves, staged
// and published with bind mounts. It serves the Identity, Controller and
// Node services on one unix socket, so that one process stands in for
// both the controller plugin that external-provisioner and
// external-attacher talk to and the node plugin that a node agent
// publishes volumes through. Every call can be appended to a call log
// (one JSON object per line, see CallRecord) that tests read to count
// what the node agent asked for.
package hostpath
