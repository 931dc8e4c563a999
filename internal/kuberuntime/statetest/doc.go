// Package statetest builds what the container runtime reports of a pod
// (sandboxes, container instances, state.PodRuntime) and a pod's allocated
// state for the tests of the kuberuntime packages that read them (planner,
// status, and state's external tests), and the Scene such a case starts
// from. The pods themselves come from podtest. It imports state and
// criconfig, so their in-package tests cannot use it. It is imported by
// tests only.
package statetest
