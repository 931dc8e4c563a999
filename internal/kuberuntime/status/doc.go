// Package status derives the API status of a pod the way the kubelet
// reports it (ComputePodStatus): the phase, the kubelet's conditions
// (carrying transition times over and keeping the ones others own, such as
// readiness gates), container, init container and ephemeral container
// statuses with their waiting reasons, restart counts and resources (and
// the health of the devices containers hold, an input), pod and host IPs,
// start time and QoS class; Equal tells whether a
// status changed at the precision the API keeps, and Patch is the status
// write that takes one to the other. It reads the pod, the
// observed runtime and the pod's state, applies the planner's rules, and does
// no I/O: the time and the node's addresses are inputs.
package status
