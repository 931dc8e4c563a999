// Package podresources serves the kubelet's pod resources API
// (k8s.io/kubelet/pkg/apis/podresources/v1) on
// <rootDir>/pod-resources/kubelet.sock, so that monitoring agents can map
// devices to the pods and containers that hold them: List, Get and
// GetAllocatableResources, with device plugins' devices and the prepared
// ResourceClaims' devices (driver, pool, device, CDI IDs); no exclusive CPUs
// or memory: nodelet has no CPU or memory manager. Calls are limited to 100
// a second with bursts of 10, all clients together, as the kubelet limits
// them. The answers are built by pure functions from the admitted pods, the
// device assignments and the prepared claims.
package podresources
