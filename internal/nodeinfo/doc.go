// Package nodeinfo computes what a node reports about itself: capacity and
// allocatable resources, addresses, system information, images, the
// runtime's features and handlers, and the Ready, MemoryPressure,
// DiskPressure and PIDPressure conditions.
//
// The computation is split in two. An Observer gathers an Observation from
// the host (behind the Host interface, so tests can fake /proc and friends)
// and the container runtime (behind the Runtime interface). ComputeStatus is
// a pure function from the previous NodeStatus and an Observation to the new
// NodeStatus; it keeps what others own (extra conditions, extended
// resources, attached volumes), moves lastTransitionTime only when a
// condition's status flips, and says whether anything but heartbeat times
// changed, so the caller writes only when needed.
//
// NewNode is the Node nodelet registers (its labels, registerWithTaints);
// FactsReader reads back what admission and the pods need of it; and
// ForeignAgent says whether another live agent, a kubelet, runs a node
// already, so that nodelet refuses to start for it.
package nodeinfo
