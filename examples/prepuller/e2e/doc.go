// Package e2e runs the pre-puller example end to end: the binary built from
// this module as the node's agent, against an envtest API server with the
// Node authorizer, a private containerd and a local registry, all started
// with nodelet's test harness (github.com/nodelet/nodelet/test/utils). It
// asserts on what the cluster and the runtime hold: the images in the CRI,
// the Node's condition and Events.
package e2e
