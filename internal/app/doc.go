// Package app is nodelet's start-up, shared by the nodelet command and by
// binaries built with the public extension package: parse flags and the
// configuration file, refuse the paths of a kubelet that runs on the host
// (its pod log directory, its kubepods cgroup: kubelet.go), connect to the
// API server (with a TLS bootstrap when asked), refuse a node another agent
// runs, build the node-scoped manager,
// open the runtime and the checkpoint store, set up the registry's enabled
// reconcilers and the node API server, and run until a signal. On the way
// it sets the garbage collector's target (GOGC 50 unless set) and drops the
// binary's start-up pages from the resident set (package residency).
package app
