// Package csi is nodelet's side of the Container Storage Interface: the
// kubelet's plugin registration API on <rootDir>/plugins_registry (so the
// stock node-driver-registrar registers a driver unchanged), the drivers'
// node service (NodeGetInfo into the node's CSINode object and topology
// labels), and the publishing of pods' CSI volumes with the kubelet's
// staging and publish paths, from which a teardown cut short by a crash is
// finished after a restart.
package csi
