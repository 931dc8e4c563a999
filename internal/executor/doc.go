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
//
// Before it creates a sandbox the executor resolves what isolation the pod
// gets, from inputs it is handed (a RuntimeClass reader, the runtime's
// cached features, a user namespace allocator): the runtime handler of the
// pod's RuntimeClass, and a user namespace of its own for a pod with
// hostUsers: false (UserNamespaces hands out one 65536-aligned ID range per
// pod and keeps it on disk across restarts). A missing RuntimeClass, a
// handler the runtime does not list, or a user namespace the handler cannot
// give fails the sandbox with the kubelet's FailedCreatePodSandBox Event and
// message; the pod stays Pending and is tried again.
//
// Observe lists the runtime for the pod's name; after a step of a sync,
// Reobserve reads the status of the objects the look before the step found
// and of those the step created (the pod's state records them), listing
// nothing: only the pod's worker creates objects of its UID. When the look
// before found objects of another pod of the name, it lists as Observe.
// The first Observe of each name in the minute after the process's first
// one takes what a single list of the whole node saw then instead of
// listing (firstLook): a restarted agent looks at a full node with two list
// calls, not two per pod.
//
// RemovePod stops a sandbox before removing it, as the CRI asks, unless
// this process stopped it already and the runtime shows it stopped: the
// runtime's stop of a stopped sandbox tears the pod's network down again.
//
// The calls that start pods (a sandbox with its cgroup, a container's
// creation and start) pass a StartGate: a few at a time, the pod that came
// first served first, so that a burst's first pods are Ready early and the
// last no later.
package executor
