// Package shutdown is nodelet's node shutdown manager, the kubelet's
// graceful node shutdown: with shutdownGracePeriod (or
// shutdownGracePeriodByPodPriority) set and the GracefulNodeShutdown gate
// on, it takes a systemd-logind "delay" inhibitor lock on shutdown over the
// system bus, first raising logind's InhibitDelayMaxSec with the kubelet's
// drop-in (99-kubelet.conf) when it is shorter than the grace period. When
// logind announces the shutdown (PrepareForShutdown true), the node is
// shutting down: admission rejects new pods (NodeShutdown), the Node's
// Ready condition turns False ("node is shutting down"), a Node event
// "Shutdown" is recorded, and the pods stop group by group, from the
// lowest priority up (Periods and GroupPods, pure), each with the smaller
// of its own grace period and its group's, ending Failed with reason
// Terminated and a DisruptionTarget condition, as the kubelet reports
// them; each group is waited for up to its period, then the lock is
// released and the machine goes down. A cancelled shutdown (false) admits
// pods again and takes the lock again. The pods are stopped by the pod
// reconciler (PodStopper), through the eviction path; this package writes
// no status. logind unreachable at the start is logged and the node then
// shuts down without waiting, as with the kubelet.
package shutdown
