package utils

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// addonsReadyTimeout bounds the wait for kube-proxy and CoreDNS to be
// ready on a cluster.
const addonsReadyTimeout = 3 * time.Minute

// InstallClusterAddons is a ClusterOptions.Addons: it imports the add-on
// images (AddonImages) into every node's containerd, installs kube-proxy
// and CoreDNS (InstallAddons) with the API server's address on the node
// network and its serving CA, and waits until they are ready
// (WaitAddonsReady).
func InstallClusterAddons(ctx context.Context, c *Cluster) error {
	archives, err := AddonImages(ctx)
	if err != nil {
		return err
	}
	for _, n := range c.Nodes {
		for image, archive := range archives {
			if err := n.Containerd.ImportArchive(ctx, image, archive); err != nil {
				return fmt.Errorf("importing %s into node %s: %w", image, n.Name, err)
			}
		}
	}
	admin, err := c.AdminClient()
	if err != nil {
		return err
	}
	opts := AddonOptions{
		APIServerURL: strings.TrimSuffix(c.API.Config.Host, "/"),
		CAData:       c.API.Config.CAData,
		ClusterCIDR:  c.ClusterCIDR(),
	}
	if err := InstallAddons(ctx, admin, opts); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, addonsReadyTimeout)
	defer cancel()
	return WaitAddonsReady(ctx, admin)
}
