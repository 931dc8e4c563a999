// Package cgroups makes and bounds the kubelet's cgroup tree for pods: the
// kubepods cgroup under cgroupRoot (bounded by the node's allocatable when
// enforceNodeAllocatable has "pods"), its burstable and besteffort children
// (their CPU shares follow the pods they hold), and one cgroup per pod,
// pod<uid>, under its QoS class's cgroup (a Guaranteed pod's directly under
// kubepods), bounded by the pod's resources (huge pages of every size the
// hugetlb controller has included, and MemoryQoS's files on cgroup v2), in
// which the runtime puts the pod's sandbox and containers. It also bounds
// the cgroups named by systemReservedCgroup and kubeReservedCgroup by their
// reservations, and holds the kubelet's start-up check of swap (swap.go)
// and what the host offers: swap accounting, hugetlb (host.go).
//
// The computations are pure and table-tested: the names of cgroups for the
// cgroupfs driver (paths) and the systemd driver (slices) in names.go; the
// settings of a pod, of the QoS cgroups and of the node in resources.go;
// the swap check in swap.go.
// Manager is the actor: it writes the settings through
// github.com/opencontainers/cgroups (v1 and v2, cgroupfs and systemd), never
// by hand, and never touches a cgroup outside its own kubepods and the
// reserved cgroups it is told to bound.
package cgroups
