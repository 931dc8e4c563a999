// Package podresources serves the kubelet's pod resources API
// (k8s.io/kubelet/pkg/apis/podresources/v1) on
// <rootDir>/pod-resources/kubelet.sock, so that monitoring agents can map
// devices to the pods and containers that hold them: List, Get and
// GetAllocatableResources, with device plugins' devices (no exclusive CPUs,
// memory or dynamic resources: nodelet has no CPU or memory manager and no
// DRA drivers yet). The answers are built by pure functions from the
// admitted pods and the device assignments.
package podresources
