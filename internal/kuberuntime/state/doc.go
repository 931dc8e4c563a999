// Package state holds what nodelet knows about one pod besides its API
// object: what the container runtime reports (PodRuntime, converted from CRI
// statuses with FromCRI, and the prober's ProbeResults) and what nodelet
// remembers across reconciles and restarts (PodState, kept in a checkpoint
// by the caller: the sandbox attempt, restart counts and back-offs, start
// failures, termination progress, the resources allocated to the pod and
// what each container runs with, the last status written). Its Record*
// methods fold what the executor did into the state; it decides nothing
// else, and does no I/O, keeps no clock and starts no goroutine: time is
// always an argument.
package state
