// Package dra is the node's side of Dynamic Resource Allocation, as the
// kubelet does it. Drivers register through the plugin watcher on
// <rootDir>/plugins_registry (internal/csi hands DRAPlugin registrations
// to Drivers, which calls a plugin's v1 DRAPlugin service, or its v1beta1
// one through the library's conversion when it serves only that); when a
// driver's last plugin goes, its ResourceSlices of this node are deleted
// after 30 seconds unless it comes back, and at start those of every
// driver not registered are.
//
// Before a pod's sandbox is made, Manager reads every ResourceClaim the
// pod uses (its spec.resourceClaims, by name or through a template, and
// the claim the scheduler made for its DRA-backed extended resources) from
// the API server, by name as the Node authorizer allows, checks that it is
// allocated and reserved for the pod, and has each driver of its
// allocation prepare the claims it has not prepared yet, with one
// NodePrepareResources call per driver. A claim that cannot be used or
// prepared fails the pod's sync with the kubelet's
// FailedPrepareDynamicResources Event, and the pod is retried with
// back-off; it never starts without its devices. Each container gets the
// CDI device IDs of the claims and requests its resources.claims name.
// Once none of a pod's containers runs, before its status says it is done
// (the claims' reservations are dropped then), the claims no other pod
// uses are unprepared (NodeUnprepareResources) and forgotten.
//
// What the node prepared, for which pods, is checkpointed in
// <rootDir>/dra_manager_state (0600) before and after each driver call, so
// that a restarted nodelet neither prepares a claim twice nor leaks one; a
// corrupt file is logged and set aside.
//
// A plugin that also announces a DRAResourceHealth service (v1, or
// v1alpha1 converted) has its NodeWatchResources stream watched by
// Drivers: opened at registration, opened again with back-off when it
// breaks, closed when the plugin goes. Health keeps each device's health
// by driver, pool and device as the kubelet does: a report holds for its
// timeout (DefaultHealthTimeout unless the driver gives one), and a
// driver's devices are Unknown once its last stream ended; it tells which
// devices changed, and Manager.PodsUsing which pods use them.
// Manager.ResourceStatus gives a pod's containers their
// allocatedResourcesStatus entries (claim:<name>[/<request>], each device
// as <driver>/<pool>/<device>).
//
// The pure parts (which claims a pod and a container use, whether a claim
// may be used by a pod, which drivers prepare it, which CDI devices a
// request gets, how a health report changes what is known, a container's
// allocatedResourcesStatus) are functions of their inputs, table-tested.
package dra
