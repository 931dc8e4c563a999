// Package kuberuntime is the pure core of nodelet's pod lifecycle: it turns a
// Pod, what the container runtime reports about it (PodRuntime, converted from
// CRI statuses with FromCRI) and what nodelet remembers about it (PodState,
// kept in a checkpoint) into decisions, without any I/O, clients, goroutines or
// clock of its own; time is always an argument. ComputePodActions plans what to
// do in the runtime (create or recreate the sandbox, start init containers in
// order and keep sidecars running, start, restart or kill regular containers
// under the restart policy and back-off, start each ephemeral container once,
// update or restart running containers whose allocated resources changed in an
// in-place resize; see resize.go) and PlanTermination how to stop a pod
// gracefully; SandboxConfig and ContainerConfig build the CRI requests for the
// executor, resolving environment variables, the downward API, DNS, resources
// and security contexts; the PodState Record* methods fold the executor's
// results back into the state; ComputePodStatus derives the API status the
// kubelet would report (phase, conditions, container states and reasons,
// resources), and
// StatusEqual tells whether it changed. The behaviour mirrors the kubelet's
// pkg/kubelet/kuberuntime and status generation as seen from the API.
package kuberuntime
