// Package executor carries out a pod's plan (internal/kuberuntime/plan) in
// the container runtime: it observes the sandboxes and containers nodelet
// owns for a pod, and, as a plan says, creates sandboxes, pulls images,
// creates, starts and stops containers, runs preStop hooks, updates running
// containers' resources in place (an in-place resize) and removes what is
// dead. It decides nothing: the pod reconciler computes every plan with
// internal/kuberuntime/planner, which this package does not import, and
// hands it over; the executor only builds the CRI requests
// (internal/kuberuntime/criconfig). It records every runtime mutation in
// the pod's state and calls the caller's save function after each, so a
// restarted agent knows what was done. Writing the pod's status is the
// reconciler's job.
package executor
