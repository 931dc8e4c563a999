// Package podtest builds pods for the tests of the kuberuntime packages
// (state, criconfig, planner and status): NewPod and the options that
// change it, container resources, the clock the cases are set at (T0,
// At), and SharedPath, which finds the memory a copy that should be deep
// shares with its original. It uses the Kubernetes API types only, so that
// the test of any of those packages can import it. It is imported by tests
// only.
package podtest
