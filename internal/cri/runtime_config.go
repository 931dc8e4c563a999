package cri

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
