package dra

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	for i := range pod.Spec.ResourceClaims {
		c := &pod.Spec.ResourceClaims[i]
		name, err := claimName(pod, c)
		if err != nil {
			return nil, err
		}
		if name != "" {
			out = append(out, ClaimRef{Name: name, Generated: c.ResourceClaimName == nil})
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; extendedResources && st != nil && st.ResourceClaimName != "" {
		out = append(out, ClaimRef{Name: st.ResourceClaimName, Generated: true})
	}
	return out, nil
}

// CheckClaim says whether pod may use claim (found as ref): made for it
// when generated, reserved for it, and allocated. It returns the claim's
// drivers (DriverStates).
func CheckClaim(pod *v1.Pod, ref ClaimRef, claim *resourceapi.ResourceClaim) ([]DriverState, error) {
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
	return DriverStates(claim.Status.Allocation.Devices.Results), nil
}

// DriverStates returns the drivers of an allocation's results, sorted by
// name, without devices yet. A driver skips NodePrepareResources (or
// NodeUnprepareResources) when every one of its results asks for that
// (skipNodeOperations naming it, or "*"), as the kubelet decides.
func DriverStates(results []resourceapi.DeviceRequestAllocationResult) []DriverState {
	type count struct{ devices, skipPrepare, skipUnprepare int }
	counts := map[string]*count{}
	for _, r := range results {
		c := counts[r.Driver]
		if c == nil {
			c = &count{}
			counts[r.Driver] = c
		}
		c.devices++
		all := slices.Contains(r.SkipNodeOperations, resourceapi.SkipNodeOperationAll)
		if all || slices.Contains(r.SkipNodeOperations, resourceapi.SkipNodeOperationNodePrepareResources) {
			c.skipPrepare++
		}
		if all || slices.Contains(r.SkipNodeOperations, resourceapi.SkipNodeOperationNodeUnprepareResources) {
			c.skipUnprepare++
		}
	}
	out := make([]DriverState, 0, len(counts))
	for name, c := range counts {
		out = append(out, DriverState{Name: name, SkipPrepare: c.skipPrepare == c.devices, SkipUnprepare: c.skipUnprepare == c.devices})
	}
	slices.SortFunc(out, func(a, b DriverState) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ContainerClaims returns the claims container c of pod uses, by claim
// name, with the requests it names of each ("" for the whole claim): the
// claims its resources.claims name, and the requests the scheduler mapped
// to its DRA-backed extended resources (extendedResources says whether
// those are on). A template that made no claim is left out.
func ContainerClaims(pod *v1.Pod, c *v1.Container, extendedResources bool) (map[string][]string, error) {
	out := map[string][]string{}
	for _, rc := range c.Resources.Claims {
		i := slices.IndexFunc(pod.Spec.ResourceClaims, func(pc v1.PodResourceClaim) bool { return pc.Name == rc.Name })
		if i < 0 {
			return nil, fmt.Errorf("container %s uses claim %q, which the pod does not list", c.Name, rc.Name)
		}
		name, err := claimName(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, err
		}
		if name != "" {
			out[name] = append(out[name], rc.Request)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; extendedResources && st != nil && st.ResourceClaimName != "" {
		for _, m := range st.RequestMappings {
			q, ok := c.Resources.Requests[v1.ResourceName(m.ResourceName)]
			if m.ContainerName == c.Name && ok && !q.IsZero() {
				out[st.ResourceClaimName] = append(out[st.ResourceClaimName], m.RequestName)
			}
		}
	}
	return out, nil
}

// claimName is the name of the claim a pod's entry names, "" when its
// template made none.
func claimName(pod *v1.Pod, c *v1.PodResourceClaim) (string, error) {
	switch {
	case c.ResourceClaimName != nil:
		return *c.ResourceClaimName, nil
	case c.ResourceClaimTemplateName != nil:
		i := slices.IndexFunc(pod.Status.ResourceClaimStatuses, func(s v1.PodResourceClaimStatus) bool { return s.Name == c.Name })
		if i < 0 {
			return "", fmt.Errorf("pod %q: %w", pod.Namespace+"/"+pod.Name, ErrClaimNotCreated)
		}
		return ptr.Deref(pod.Status.ResourceClaimStatuses[i].ResourceClaimName, ""), nil
	default:
		return "", fmt.Errorf("pod %q, spec.resourceClaim %q: none of the supported fields are set", pod.Namespace+"/"+pod.Name, c.Name)
	}
}

// CDIDeviceIDs returns the CDI device IDs a prepared claim gives for a
// request ("" for all of them), in the drivers' order: a device is for
// the request when it names it, a subrequest of it ("<request>/<sub>"),
// or no request at all.
func CDIDeviceIDs(claim ClaimState, request string) []string {
	var out []string
	for _, d := range claim.Drivers {
		for _, dev := range d.Devices {
			if request == "" || len(dev.RequestNames) == 0 || slices.ContainsFunc(dev.RequestNames, func(n string) bool {
				return n == request || strings.HasPrefix(n, request+"/")
			}) {
				out = append(out, dev.CDIDeviceIDs...)
			}
		}
	}
	return out
}
