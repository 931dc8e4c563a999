package cri

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// UpdateRuntimeConfig implements Runtime.
func (c *Client) UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) (err error) {
	defer func(start time.Time) { observe("update_runtime_config", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	if err := c.runtime.UpdateRuntimeConfig(ctx, config); err != nil {
		return fmt.Errorf("updating the runtime config (pod CIDR %q): %w", config.GetNetworkConfig().GetPodCidr(), err)
	}
	return nil
}

// CgroupDriver returns the cgroup driver the runtime uses, as it answers
// CRI RuntimeConfig: v1alpha1's "cgroupfs" or "systemd". It returns ""
// and no error when the runtime does not implement RuntimeConfig
// (containerd 1.6) or answers without a Linux part; the configured driver
// stands then.
func (c *Client) CgroupDriver(ctx context.Context) (_ string, err error) {
	defer func(start time.Time) { observe("runtime_config", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.RuntimeConfig(ctx)
	if status.Code(err) == codes.Unimplemented {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the runtime's cgroup driver: %w", err)
	}
	return CgroupDriverOf(resp)
}

// CgroupDriverOf reads the cgroup driver out of a RuntimeConfig answer:
// "" when it has no Linux part.
func CgroupDriverOf(resp *runtimeapi.RuntimeConfigResponse) (string, error) {
	linux := resp.GetLinux()
	if linux == nil {
		return "", nil
	}
	switch d := linux.GetCgroupDriver(); d {
	case runtimeapi.CgroupDriver_SYSTEMD:
		return v1alpha1.CgroupDriverSystemd, nil
	case runtimeapi.CgroupDriver_CGROUPFS:
		return v1alpha1.CgroupDriverCgroupfs, nil
	default:
		return "", fmt.Errorf("reading the runtime's cgroup driver: unknown driver %d", d)
	}
}
