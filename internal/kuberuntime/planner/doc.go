// Package planner decides what must change in the container runtime for
// one pod, as the kubelet's pkg/kubelet/kuberuntime does, and returns it as
// a plan (internal/kuberuntime/plan) for the executor: ComputePodActions
// plans the start (create or recreate the sandbox, run init containers in
// order and keep sidecars running, start, restart or kill regular
// containers under the restart policy, probes and back-off, start each
// ephemeral container once, update or restart running containers whose
// allocated resources changed in an in-place resize); PlanTermination plans
// the next step of stopping a pod gracefully (preStop hooks, grace periods,
// sidecars last); SelectGarbage picks the dead containers and sandboxes no
// status needs. The back-off, active deadline, restart policy and grace
// period rules the status also follows are here. It reads the pod, the
// observed runtime and the pod's state (internal/kuberuntime/state) and
// does no I/O: time and the node's settings are arguments.
package planner
