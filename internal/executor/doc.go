// Package executor carries out a pod's plan in the container runtime: it
// observes the sandboxes and containers nodelet owns for a pod, creates
// sandboxes, pulls images, creates, starts and stops containers, runs
// preStop hooks, updates running containers' resources in place (an
// in-place resize) and removes what is dead. It records every runtime mutation
// in the pod's state and calls the caller's save function after each, so a
// restarted agent knows what was done. Deciding what to do is
// internal/kuberuntime/plan's job; writing the pod's status is the reconciler's.
package executor
