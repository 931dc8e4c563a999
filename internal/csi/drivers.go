package csi

import (
	"context"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// Drivers gives the node service of a registered CSI driver. It returns an
// error naming the driver when no driver of that name is registered.
type Drivers interface {
	NodeClient(ctx context.Context, driver string) (csipb.NodeClient, error)
}
