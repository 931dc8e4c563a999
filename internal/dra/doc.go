// Package dra is the node's side of Dynamic Resource Allocation: before a
// pod's sandbox is made, every ResourceClaim the pod uses (its
// spec.resourceClaims, by name or through a template, and the claim the
// scheduler made for its DRA-backed extended resources) must be allocated,
// reserved for the pod, and prepared by the DRA driver that allocated it.
//
// The node registers no DRA driver yet, so a pod with a claim that needs
// one is never started: its sync fails with the kubelet's
// FailedPrepareDynamicResources Event, naming what is missing (a claim not
// created, not allocated, not reserved for the pod, or its driver not
// registered), and is retried with back-off. A pod whose claims need no
// node operation (a template that made no claim) starts as usual.
//
// The pure parts (which claims a pod uses, whether a claim may be used by
// it, which drivers must prepare it) are functions of the pod and the
// claim; Preparer reads the claims from the API server by name, as the
// Node authorizer lets a node read the claims of its pods.
package dra
