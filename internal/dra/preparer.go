package dra

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Preparer prepares the ResourceClaims of pods before their sandboxes are
// made.
type Preparer struct {
	// Reader reads ResourceClaims by name from the API server (uncached:
	// a claim's allocation and reservation change just before the pod
	// starts).
	Reader client.Reader
	// ExtendedResources is the DRAExtendedResource gate: the claim the
	// scheduler made for a pod's DRA-backed extended resources is prepared
	// too.
	ExtendedResources bool
}

// Prepare makes sure every claim pod uses may be used by it and is
// prepared by its driver. No DRA driver registers with the node yet, so a
// claim allocated by a driver is an error naming it: the pod is not
// started without its devices. A pod without claims costs nothing.
func (p *Preparer) Prepare(ctx context.Context, pod *v1.Pod) error {
	if len(pod.Spec.ResourceClaims) == 0 && (!p.ExtendedResources || pod.Status.ExtendedResourceClaimStatus == nil) {
		return nil
	}
	if err := p.prepare(ctx, pod); err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

func (p *Preparer) prepare(ctx context.Context, pod *v1.Pod) error {
	refs, err := PodClaims(pod, p.ExtendedResources)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		claim := &resourceapi.ResourceClaim{}
		if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, claim); err != nil {
			return fmt.Errorf("fetch ResourceClaim %s: %w", ref.Name, err)
		}
		drivers, err := CheckClaim(pod, ref, claim)
		if err != nil {
			return err
		}
		if len(drivers) > 0 {
			return fmt.Errorf("DRA driver %s is not registered", drivers[0])
		}
	}
	return nil
}
