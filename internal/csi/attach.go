package csi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// attachRequired is the CSIDriver's attachRequired; without a CSIDriver
// object, or without the field, a driver needs attaching, as for the
// kubelet.
func attachRequired(d *storagev1.CSIDriver) bool {
	return d == nil || d.Spec.AttachRequired == nil || *d.Spec.AttachRequired
}

// attachmentState tells what a VolumeAttachment says of the volume: ready
// (attached), a failure to report, or neither (keep waiting).
func attachmentState(va *storagev1.VolumeAttachment) (attached bool, err error) {
	switch {
	case va.DeletionTimestamp != nil:
		return false, errors.New("volume attachment is being deleted")
	case va.Status.Attached:
		return true, nil
	case va.Status.AttachError != nil:
		return false, errors.New(va.Status.AttachError.Message)
	}
	return false, nil
}

// resourceExhausted tells whether the attachment failed with the gRPC code
// ResourceExhausted: the driver could attach no more volumes to the node.
func resourceExhausted(va *storagev1.VolumeAttachment) bool {
	e := va.Status.AttachError
	return e != nil && e.ErrorCode != nil && *e.ErrorCode == int32(codes.ResourceExhausted)
}

// waitForAttachment polls the VolumeAttachment that attaches the volume to
// this node until it is attached, and returns its attachment metadata,
// which the driver gets as the publish context. It gives up after the
// attach timeout with the kubelet's "attachment timeout for volume <handle>"
// (the caller retries the pod later), and at once when the attachment
// reports an error or is being deleted.
func (p *Publisher) waitForAttachment(ctx context.Context, handle, driver string) (map[string]string, error) {
	name := attachmentName(handle, driver, p.nodeName)
	start := p.clock.Now()
	var notYet error
	// The attach/detach controller and the attacher take tens of
	// milliseconds: look again soon, then back off to attachPoll.
	delay := p.attachPoll / 10
	for {
		va, err := p.volumeAttachment(ctx, name)
		switch {
		case apierrors.IsNotFound(err):
			// Not created yet by the attach/detach controller.
		case apierrors.IsForbidden(err):
			// The Node authorizer lets a node read an attachment once it
			// exists and names the node: until then a read is forbidden.
			notYet = err
		case err != nil:
			return nil, fmt.Errorf("getting VolumeAttachment %s for volume %s: %w", name, handle, err)
		default:
			attached, err := attachmentState(va)
			if resourceExhausted(va) && p.resourceExhausted != nil {
				p.resourceExhausted(driver)
			}
			if err != nil {
				return nil, fmt.Errorf("attachment for %s failed: %w", handle, err)
			}
			if attached {
				return va.Status.AttachmentMetadata, nil
			}
		}
		if p.clock.Since(start) >= p.attachTimeout {
			if notYet != nil {
				return nil, fmt.Errorf("attachment timeout for volume %s (last read: %w)", handle, notYet)
			}
			return nil, fmt.Errorf("attachment timeout for volume %s", handle)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for VolumeAttachment %s: %w", name, ctx.Err())
		case <-p.clock.After(delay):
		}
		delay = min(2*delay, p.attachPoll)
	}
}
