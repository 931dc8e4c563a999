// Package plan is the plan as data: what the planner
// (internal/kuberuntime/planner) decided must change in the container
// runtime for one pod, and what the executor carries out. PodActions is the
// start plan (a new sandbox, single-container kills, the containers to
// start in order, those backing off, in-place resizes), TerminationPlan the
// next step of stopping a pod for good (preStop hooks, containers,
// sandboxes), Garbage the dead containers and sandboxes to remove. It holds
// no decision and does no I/O; its methods only read the pod's spec.
package plan
