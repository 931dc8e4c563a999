// Package controller holds nodelet's built-in reconcilers and the registry
// that names them (registry.go): pod, the pod engine and most of this
// package (pod_controller.go and the pod_*.go files beside it: set-up,
// admission, resize, housekeeping, eviction, metrics; it wires the pod
// workers, the relister, the prober, the executor, volumes, devices and
// DRA, which is why this package imports most of internal/),
// configmap and secret (one file each, sharing object_volumes.go), node
// (node_controller.go), podcidr (podcidr_controller.go: the Node's pod CIDRs
// to the runtime), and csi (csi_setup.go: CSI driver registration through
// the plugin watcher, the CSINode, attach and publish). internal/app
// resolves the controllers list against a Registry and calls each enabled
// setup function; a built-in reconciler is one file and one line in
// registry.go, and one from outside registers through the public
// pkg/nodelet, which lends it what SharedFor returns.
package controller
