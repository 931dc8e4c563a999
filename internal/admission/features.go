package admission

import (
	v1 "k8s.io/api/core/v1"
)

// ReasonSupplementalGroupsPolicyNotSupported is the kubelet's reason for a
// pod asking for a supplementalGroupsPolicy the node cannot honour.
const ReasonSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicyNotSupported"

// RuntimeFeatures is what the container runtime says it can do that
// admission depends on.
type RuntimeFeatures struct {
	// SupplementalGroupsPolicy is whether the runtime honours
	// supplementalGroupsPolicy Strict (the node's
	// status.features.supplementalGroupsPolicy).
	SupplementalGroupsPolicy bool
}

// admitSupplementalGroupsPolicy refuses a pod asking for the Strict
// supplemental groups policy on a runtime that does not support it, as the
// kubelet does since the policy's beta: the runtime would silently merge
// the image's groups in.
func admitSupplementalGroupsPolicy(f RuntimeFeatures, pod *v1.Pod) Result {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict {
		return Result{Admit: true}
	}
	if f.SupplementalGroupsPolicy {
		return Result{Admit: true}
	}
	return reject(ReasonSupplementalGroupsPolicyNotSupported, "SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)
}

// admitOS refuses a pod for another operating system.
func admitOS(pod *v1.Pod) Result {
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != goos {
		return reject(ReasonPodOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS")
	}
	if os, ok := pod.Spec.NodeSelector[v1.LabelOSStable]; ok && os != goos {
		return reject(ReasonOSSelectorMismatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
	}
	return Result{Admit: true}
}
