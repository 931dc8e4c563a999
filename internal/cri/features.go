package cri

import (
	"context"
	"encoding/json"
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
	// CDI is whether the runtime applies the CDI devices of a container's
	// config (ContainerConfig.CDIDevices); see CDIFromRuntime.
	CDI bool
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

// CDIFromRuntime reports whether the runtime that answered status (a
// verbose Status) and v applies CDI devices. No CRI field says so.
// containerd's verbose status carries its CRI configuration, whose
// enableCDI says it where the option exists (containerd 1.7, and 2 until
// CDI became always on: 2.4 has no such option). Without it, a containerd
// before 2.0 (1.6 knows nothing of CDI, 1.7 has it off by default) would
// run the container without its devices, and containerd 2, which has it
// on by default or always, applies them. Another runtime (CRI-O applies CDI devices
// since 1.23) is trusted to refuse what it cannot do.
func CDIFromRuntime(status *runtimeapi.StatusResponse, v *runtimeapi.VersionResponse) bool {
	var cfg struct {
		EnableCDI *bool `json:"enableCDI"`
	}
	if raw, ok := status.GetInfo()["config"]; ok && json.Unmarshal([]byte(raw), &cfg) == nil && cfg.EnableCDI != nil {
		return *cfg.EnableCDI
	}
	if v.GetRuntimeName() != "containerd" {
		return true
	}
	have, err := utilversion.ParseGeneric(v.GetRuntimeVersion())
	return err == nil && have.AtLeast(utilversion.MajorMinor(2, 0))
}

// FeatureSource reads the runtime's features; Client implements it.
type FeatureSource interface {
	Features(ctx context.Context) (Features, error)
}

// Features implements FeatureSource with one Status and one Version call.
func (c *Client) Features(ctx context.Context) (Features, error) {
	resp, err := c.verboseStatus(ctx)
	if err != nil {
		return Features{}, err
	}
	f := FeaturesFromStatus(resp)
	v, err := c.Version(ctx)
	if err != nil {
		return Features{}, fmt.Errorf("getting runtime features: %w", err)
	}
	f.ImageVolumes = ImageVolumesFromVersion(v)
	f.CDI = CDIFromRuntime(resp, v)
	return f, nil
}

// verboseStatus is the runtime's Status with its information (for
// containerd, its CRI configuration).
func (c *Client) verboseStatus(ctx context.Context) (_ *runtimeapi.StatusResponse, err error) {
	defer func(start time.Time) { observe("status", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.Status(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("getting runtime features: %w", err)
	}
	return resp, nil
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
