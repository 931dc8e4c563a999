// Package prober runs the startup, readiness and liveness probes of the
// containers of this node's pods, with the kubelet's semantics. The pod
// reconciler calls Manager.Sync on every sync; the Manager keeps one worker
// goroutine per running container instance and probe type, keyed by
// container ID, and stops the workers of instances that stopped running.
// A worker waits initialDelaySeconds from the container's start, then runs
// its probe (exec through the CRI, httpGet, tcpSocket or grpc) every
// periodSeconds with timeoutSeconds, and records a result only once
// successThreshold successes or failureThreshold failures ran in a row.
// Readiness and liveness probes wait for the startup probe to succeed; the
// startup probe stops after its success, and a liveness or startup probe
// stops after the failure that gets its container killed. Results are read
// by pod (Results: the state.ProbeResults of internal/kuberuntime/state,
// by container ID); every change of a result sends the pod on the channel
// of Events so the pod controller syncs it again. Failed probes are
// recorded as Unhealthy events on the pod, as the kubelet does.
package prober
