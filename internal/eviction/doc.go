// Package eviction is nodelet's eviction manager: it measures the node's
// eviction signals (memory.available, nodefs and imagefs space and inodes,
// pid.available) every evictionMonitoringInterval, decides with pure
// functions which hard and soft thresholds are met (grace periods, minimum
// reclaim), keeps the MemoryPressure, DiskPressure and PIDPressure
// conditions for evictionPressureTransitionPeriod after their last
// observation, reclaims node-level resources (dead containers, unused
// images) before evicting, and then evicts one pod per round, ranked as the
// kubelet ranks them. It also evicts, at once, pods that write past their
// local ephemeral storage limits. Like the kubelet, it never evicts a
// critical pod (static, mirror, or of system-cluster-critical priority or
// above: admission.CriticalPod), for either reason. It never writes pod
// status: it hands the eviction to the pod reconciler (Evictor), whose plan
// stops the pod and whose status computation reports it Failed with reason
// Evicted.
package eviction
