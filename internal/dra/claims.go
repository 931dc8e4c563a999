package dra

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrClaimNotCreated is wrapped by the error of a pod whose template claim
// the resource claim controller has not made yet.
var ErrClaimNotCreated = errors.New("ResourceClaim not created yet")

// ClaimRef is one ResourceClaim a pod uses.
type ClaimRef struct {
	// Name is the claim's name in the pod's namespace.
	Name string
	// Generated says the claim was made from a template for this pod, so
	// the pod must own it.
	Generated bool
}

// PodClaims returns the claims pod uses, in its spec's order, then the
// claim of its DRA-backed extended resources (extendedResources says
// whether those are on). A template whose status names no claim needs
// none and is left out; one without a status entry yet is an error
// wrapping ErrClaimNotCreated.
func PodClaims(pod *v1.Pod, extendedResources bool) ([]ClaimRef, error) {
	var out []ClaimRef
	for _, c := range pod.Spec.ResourceClaims {
		switch {
		case c.ResourceClaimName != nil:
			out = append(out, ClaimRef{Name: *c.ResourceClaimName})
		case c.ResourceClaimTemplateName != nil:
			i := slices.IndexFunc(pod.Status.ResourceClaimStatuses, func(s v1.PodResourceClaimStatus) bool { return s.Name == c.Name })
			if i < 0 {
				return nil, fmt.Errorf("pod %q: %w", pod.Namespace+"/"+pod.Name, ErrClaimNotCreated)
			}
			if name := pod.Status.ResourceClaimStatuses[i].ResourceClaimName; name != nil {
				out = append(out, ClaimRef{Name: *name, Generated: true})
			}
		default:
			return nil, fmt.Errorf("pod %q, spec.resourceClaim %q: none of the supported fields are set", pod.Namespace+"/"+pod.Name, c.Name)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; extendedResources && st != nil && st.ResourceClaimName != "" {
		out = append(out, ClaimRef{Name: st.ResourceClaimName, Generated: true})
	}
	return out, nil
}

// CheckClaim says whether pod may use claim (found as ref): made for it
// when generated, allocated, and reserved for it. It returns the drivers
// that must prepare the claim's devices, sorted.
func CheckClaim(pod *v1.Pod, ref ClaimRef, claim *resourceapi.ResourceClaim) ([]string, error) {
	if claim.Namespace != pod.Namespace {
		return nil, fmt.Errorf("ResourceClaim %s/%s is not in the same namespace as Pod %s/%s", claim.Namespace, claim.Name, pod.Namespace, pod.Name)
	}
	if ref.Generated && !metav1.IsControlledBy(claim, pod) {
		return nil, fmt.Errorf("ResourceClaim %s/%s was not created for Pod %s/%s (Pod is not owner)", claim.Namespace, claim.Name, pod.Namespace, pod.Name)
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
		return nil, fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, claim.Name, claim.UID)
	}
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("ResourceClaim %s: not allocated", claim.Name)
	}
	var drivers []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if !slices.Contains(drivers, r.Driver) {
			drivers = append(drivers, r.Driver)
		}
	}
	slices.Sort(drivers)
	return drivers, nil
}
