package dra

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// APISlices deletes this node's ResourceSlices through the API server, as
// the Node authorizer lets a node: list and delete a collection with a
// field selector on spec.nodeName naming it.
type APISlices struct {
	// Client deletes; Reader lists (uncached: no cluster-wide informer).
	Client client.Client
	Reader client.Reader
	Node   string
}

var _ SliceCleaner = (*APISlices)(nil)

// DriversWithSlices implements SliceCleaner.
func (a *APISlices) DriversWithSlices(ctx context.Context) ([]string, error) {
	var list resourceapi.ResourceSliceList
	if err := a.Reader.List(ctx, &list, client.MatchingFields{resourceapi.ResourceSliceSelectorNodeName: a.Node}); err != nil {
		return nil, fmt.Errorf("listing the ResourceSlices of node %s: %w", a.Node, err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Spec.Driver)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// DeleteSlices implements SliceCleaner.
func (a *APISlices) DeleteSlices(ctx context.Context, driver string) error {
	err := a.Client.DeleteAllOf(ctx, &resourceapi.ResourceSlice{}, client.MatchingFields{
		resourceapi.ResourceSliceSelectorNodeName: a.Node,
		resourceapi.ResourceSliceSelectorDriver:   driver,
	})
	if err != nil {
		return fmt.Errorf("deleting the ResourceSlices of driver %s on node %s: %w", driver, a.Node, err)
	}
	return nil
}
