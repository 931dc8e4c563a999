// Package deviceplugin is nodelet's device manager for the kubelet's device
// plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): a Registration
// server on <rootDir>/device-plugins/kubelet.sock (and a handler of the plugin
// watcher's DevicePlugin registrations), one ListAndWatch stream per
// registered resource whose devices become the Node's capacity (every device)
// and allocatable (the healthy ones), the allocation of devices to the
// containers of admitted pods (GetPreferredAllocation, Allocate), what
// those allocations add to a container's CRI config (PreStartContainer,
// environment, mounts, device nodes, annotations, CDI devices), and the
// health of a container's devices for its status' allocatedResourcesStatus
// (Healthy or Unhealthy as listed, Unknown while the plugin is away), with
// the pods to write again when it changes (Options.OnHealthChange).
// Assignments and registered resources are checkpointed so a restarted
// agent keeps them. The picking of devices, the counting of resources and
// the status entries are pure functions.
package deviceplugin
