// Package admission decides, before a pod is started, whether this node can
// run it, the way the kubelet's admission does: the pod's sysctls against
// the safe set and the configured unsafe ones, room for one more pod,
// requests within what is left of allocatable, the pod's node selector and
// required node affinity, the node's NoExecute and NoSchedule taints, free
// host ports, the pod's OS, whether the runtime supports the pod's
// supplementalGroupsPolicy and whether the node can enforce its AppArmor
// profiles. It is pure: the caller passes the node, the pods already
// admitted, what the runtime reports it supports (Policy.Runtime, set for
// each decision) and what it read of the host (the kernel's release and whether
// AppArmor is enabled, read once when the Policy is built; the loaded
// AppArmor profiles, read for each decision that needs them, see
// Policy.NeedsLoadedProfiles; SysAppArmor reads both for the caller), and
// turns a rejection into a Failed pod status and an Event with the returned
// reason and message. FitsResize decides the same way whether an admitted
// pod's in-place resize fits now (Deferred), or can never fit (Infeasible).
// Requests keeps what the admitted pods request, so that a decision does not
// sum every admitted pod's containers again (Policy.Requests). CriticalPod is
// nodelet's one rule for the pods the kubelet treats as critical, which the
// CRI configuration and the eviction manager read too.
package admission
