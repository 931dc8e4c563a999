// Package runtimestate keeps what the container runtime last said of its
// network, for the pod syncs that must not create a sandbox on the pod
// network while the runtime's network is not ready (the kubelet's
// NetworkNotReady). NetworkError is the pure reading of a CRI
// RuntimeStatus, in the kubelet's words; Network reads the runtime's
// Status at most once per MaxAge however many pods ask, so a burst of pods
// costs one call, and a held pod retried every second sees the network
// turn ready within about MaxAge of the runtime saying so.
package runtimestate
