package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Features is what the runtime says it can do, from its Status response:
// the runtime handlers it has, with their features, and its runtime-wide
// features (and, from its version, whether it mounts image volumes). A runtime that reports neither (containerd 1.6) supports none
// of them; nothing is assumed.
type Features struct {
	// HandlersReported is whether the runtime lists its handlers; only
	// then is a handler missing from Handlers known not to exist.
	HandlersReported bool
	// Handlers are the runtime handlers by name; "" is the default one.
	Handlers map[string]HandlerFeatures
	// FeaturesReported is whether the runtime reports its runtime-wide
	// features at all (containerd 1.6 does not).
	FeaturesReported bool
	// SupplementalGroupsPolicy is whether the runtime honours
	// supplementalGroupsPolicy Strict (and reports the container's user).
	SupplementalGroupsPolicy bool
	// UserNamespacesHostNetwork is whether a pod may have a user namespace
	// and the host's network at once.
	UserNamespacesHostNetwork bool
	// ImageVolumes is whether the runtime mounts OCI images as volumes
	// (CRI Mount.image). No CRI field says so; it is read from the
	// runtime's name and version (ImageVolumesFromVersion).
	ImageVolumes bool
}

// HandlerFeatures is what one runtime handler supports.
type HandlerFeatures struct {
	// UserNamespaces is whether the handler runs pods in user namespaces
	// with idmapped mounts.
	UserNamespaces bool
	// RecursiveReadOnlyMounts is whether it makes read-only mounts
	// read-only recursively.
	RecursiveReadOnlyMounts bool
}

// FeaturesFromStatus reads the features out of a runtime's Status response.
func FeaturesFromStatus(resp *runtimeapi.StatusResponse) Features {
	var f Features
	if hs := resp.GetRuntimeHandlers(); len(hs) > 0 {
		f.HandlersReported = true
		f.Handlers = make(map[string]HandlerFeatures, len(hs))
		for _, h := range hs {
			f.Handlers[h.GetName()] = HandlerFeatures{
				UserNamespaces:          h.GetFeatures().GetUserNamespaces(),
				RecursiveReadOnlyMounts: h.GetFeatures().GetRecursiveReadOnlyMounts(),
			}
		}
	}
	f.FeaturesReported = resp.GetFeatures() != nil
	f.SupplementalGroupsPolicy = resp.GetFeatures().GetSupplementalGroupsPolicy()
	f.UserNamespacesHostNetwork = resp.GetFeatures().GetUserNamespacesHostNetwork()
	return f
}

// HasHandler reports whether the runtime has the handler: it does when it
// lists it, and is assumed to when it lists no handlers at all.
func (f Features) HasHandler(handler string) bool {
	if !f.HandlersReported {
		return true
	}
	_, ok := f.Handlers[handler]
	return ok
}

// UserNamespaces reports whether the handler supports user namespaces.
func (f Features) UserNamespaces(handler string) bool {
	return f.Handlers[handler].UserNamespaces
}

// imageVolumeRuntimes are the first versions of the runtimes known to mount
// image volumes; a runtime older than its entry ignores CRI Mount.image and
// would mount nothing where the volume should be.
var imageVolumeRuntimes = map[string]*utilversion.Version{
	"containerd": utilversion.MustParseGeneric("2.1.0"),
	"cri-o":      utilversion.MustParseGeneric("1.31.0"),
}

// ImageVolumesFromVersion reports whether the runtime that answered v
// mounts image volumes: containerd from 2.1, CRI-O from 1.31. A runtime not
// in that list, or a version that does not parse, is trusted to refuse
// what it cannot do.
func ImageVolumesFromVersion(v *runtimeapi.VersionResponse) bool {
	first, known := imageVolumeRuntimes[v.GetRuntimeName()]
	if !known {
		return true
	}
	have, err := utilversion.ParseGeneric(v.GetRuntimeVersion())
	if err != nil {
		return true
	}
	return have.AtLeast(first)
}

// FeatureSource reads the runtime's features; Client implements it.
type FeatureSource interface {
	Features(ctx context.Context) (Features, error)
}

// Features implements FeatureSource with one Status and one Version call.
func (c *Client) Features(ctx context.Context) (Features, error) {
	f, err := c.statusFeatures(ctx)
	if err != nil {
		return Features{}, err
	}
	v, err := c.Version(ctx)
	if err != nil {
		return Features{}, fmt.Errorf("getting runtime features: %w", err)
	}
	f.ImageVolumes = ImageVolumesFromVersion(v)
	return f, nil
}

func (c *Client) statusFeatures(ctx context.Context) (_ Features, err error) {
	defer func(start time.Time) { observe("status", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.Status(ctx, false)
	if err != nil {
		return Features{}, fmt.Errorf("getting runtime features: %w", err)
	}
	return FeaturesFromStatus(resp), nil
}

// DefaultFeatureRefresh is how old the features a FeatureCache hands out
// may be: a runtime's handlers and features change only when it is
// reconfigured and restarted.
const DefaultFeatureRefresh = 5 * time.Minute

// ErrFeaturesUnknown is returned by a FeatureCache that has no source.
var ErrFeaturesUnknown = errors.New("the runtime's features are not known")

// FeatureCache hands out the runtime's features, read once and again when
// they are older than Refresh, so that a pod sync costs no runtime call. A
// failed refresh keeps the features read last; with none it returns the
// error. Safe for concurrent use.
type FeatureCache struct {
	Source  FeatureSource
	Refresh time.Duration
	Clock   clock.PassiveClock

	mu   sync.Mutex
	last *Features
	at   time.Time
}

// NewFeatureCache returns a cache over src; a nil src knows no features.
func NewFeatureCache(src FeatureSource) *FeatureCache {
	return &FeatureCache{Source: src, Refresh: DefaultFeatureRefresh, Clock: clock.RealClock{}}
}

// Features implements FeatureSource.
func (c *FeatureCache) Features(ctx context.Context) (Features, error) {
	if c == nil || c.Source == nil {
		return Features{}, ErrFeaturesUnknown
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Clock.Now()
	if c.last != nil && now.Sub(c.at) < c.Refresh {
		return *c.last, nil
	}
	f, err := c.Source.Features(ctx)
	if err != nil {
		if c.last != nil {
			return *c.last, nil
		}
		return Features{}, err
	}
	c.last, c.at = &f, now
	return f, nil
}
