package cri

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RemoveImage implements Runtime.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) (err error) {
	defer func(start time.Time) { observe("remove_image", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.images.RemoveImage(ctx, image); err != nil {
		return ignoreNotFound(fmt.Errorf("removing image %s: %w", image.GetImage(), err))
	}
	return nil
}

// ImagesInUse implements Runtime.
func (c *Client) ImagesInUse(ctx context.Context) (_ map[string]bool, err error) {
	defer func(start time.Time) { observe("list_containers", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if c.brief != nil {
		// Over the brief lists' connection, only the images of each
		// container are decoded: the image GC asks every 30s, and a full
		// list decoded every container's labels and annotations.
		used := imageSet{}
		if err := c.brief.Invoke(ctx, methodListContainers, allContainersRequest, used, grpc.ForceCodecV2(imagesCodec{})); err != nil {
			return nil, fmt.Errorf("listing the images of the runtime's containers: %w", err)
		}
		return used, nil
	}
	all, err := c.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing the images of the runtime's containers: %w", err)
	}
	used := make(map[string]bool, 2*len(all))
	for _, ctr := range all {
		if ref := ctr.GetImageRef(); ref != "" {
			used[ref] = true
		}
		if img := ctr.GetImage().GetImage(); img != "" {
			used[img] = true
		}
		if id := ctr.GetImageId(); id != "" {
			used[id] = true
		}
	}
	return used, nil
}

// ReopenContainerLog implements Runtime.
func (c *Client) ReopenContainerLog(ctx context.Context, containerID string) (err error) {
	defer func(start time.Time) { observe("reopen_container_log", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		return fmt.Errorf("reopening the log of container %s: %w", containerID, err)
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.runtime.ReopenContainerLog(ctx, containerID); err != nil {
		return fmt.Errorf("reopening the log of container %s: %w", containerID, err)
	}
	return nil
}
