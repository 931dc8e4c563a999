package csi

import (
	"context"
	"fmt"
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// allocatablePeriod is the CSIDriver's nodeAllocatableUpdatePeriodSeconds;
// zero (no refresh) without the object or the field.
func allocatablePeriod(d *storagev1.CSIDriver) time.Duration {
	if d == nil || d.Spec.NodeAllocatableUpdatePeriodSeconds == nil {
		return 0
	}
	return time.Duration(*d.Spec.NodeAllocatableUpdatePeriodSeconds) * time.Second
}

// allocatablePlan is what to do about one driver's node info now.
type allocatablePlan struct {
	// refresh asks the driver's NodeGetInfo again and writes what it says.
	refresh bool
	// last is when the node info was last asked, to remember; zero
	// forgets it.
	last time.Time
	// after is when to look again; zero is not until something changes.
	after time.Duration
}

// planAllocatableRefresh decides, as the kubelet does with
// MutableCSINodeAllocatableCount (on by default since 1.35), whether a
// driver's NodeGetInfo is asked again to refresh its CSINode entry: only
// for a registered driver whose CSIDriver sets a period; every period after
// the last time it was asked (its registration asks it, so the first
// refresh is one period after it); and at once when an attachment of its
// failed with ResourceExhausted. last is zero when the driver's info was
// never asked in this process.
func planAllocatableRefresh(registered bool, period time.Duration, last, now time.Time, exhausted bool) allocatablePlan {
	switch {
	case !registered || period <= 0:
		return allocatablePlan{}
	case exhausted:
		return allocatablePlan{refresh: true, last: now, after: period}
	case last.IsZero():
		return allocatablePlan{last: now, after: period}
	}
	if elapsed := now.Sub(last); elapsed < period {
		return allocatablePlan{last: last, after: period - elapsed}
	}
	return allocatablePlan{refresh: true, last: now, after: period}
}

// AllocatableOptions configure an AllocatableRefresher.
type AllocatableOptions struct {
	// Registry gives the registered drivers and their node services.
	Registry *Registry
	// Installer takes the refreshed node info (*NodeInfo).
	Installer DriverInstaller
	// CSIDriver reads a CSIDriver object; an error for which
	// apierrors.IsNotFound is true means none.
	CSIDriver func(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	// Clock is the real clock when nil.
	Clock clock.Clock
	// NodeGetInfoTimeout bounds each NodeGetInfo; DefaultNodeGetInfoTimeout
	// when zero.
	NodeGetInfoTimeout time.Duration
}

// AllocatableRefresher keeps the allocatable volume count of the CSINode
// entries of drivers whose CSIDriver sets nodeAllocatableUpdatePeriodSeconds
// current: it asks such a driver's NodeGetInfo every period, and at once
// when one of its volumes' attachments failed with ResourceExhausted, and
// hands what the driver says to the node info writer, which updates the
// CSINode when it changed. Reconcile is called per driver name (by a
// controller on CSIDriver objects and on Events); InstallDriver and
// UninstallDriver follow the plugin watcher's registrations.
type AllocatableRefresher struct {
	opts   AllocatableOptions
	events chan event.GenericEvent

	mu sync.Mutex
	// last is when each registered driver's NodeGetInfo was last asked.
	last map[string]time.Time
	// exhausted are the drivers with an attachment failed with
	// ResourceExhausted since their last refresh.
	exhausted map[string]bool
}

// NewAllocatableRefresher returns a refresher configured by opts.
func NewAllocatableRefresher(opts AllocatableOptions) *AllocatableRefresher {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.NodeGetInfoTimeout <= 0 {
		opts.NodeGetInfoTimeout = DefaultNodeGetInfoTimeout
	}
	return &AllocatableRefresher{
		opts:      opts,
		events:    make(chan event.GenericEvent, 64),
		last:      map[string]time.Time{},
		exhausted: map[string]bool{},
	}
}

// Events are the driver names to reconcile (as CSIDriver objects with only
// a name), for a controller's channel source.
func (r *AllocatableRefresher) Events() <-chan event.GenericEvent { return r.events }

// enqueue asks for a reconcile of driver without blocking: a full channel
// means reconciles are pending anyway, and the controller's resync of the
// CSIDriver objects catches up.
func (r *AllocatableRefresher) enqueue(driver string) {
	d := &storagev1.CSIDriver{}
	d.Name = driver
	select {
	case r.events <- event.GenericEvent{Object: d}:
	default:
	}
}

// InstallDriver notes that the driver registered: the registration asked
// its NodeGetInfo just now, so the first refresh is one period later.
func (r *AllocatableRefresher) InstallDriver(name string, _ DriverNodeInfo) {
	r.mu.Lock()
	r.last[name] = r.opts.Clock.Now()
	r.mu.Unlock()
	r.enqueue(name)
}

// UninstallDriver forgets a deregistered driver.
func (r *AllocatableRefresher) UninstallDriver(name string) {
	r.mu.Lock()
	delete(r.last, name)
	delete(r.exhausted, name)
	r.mu.Unlock()
	r.enqueue(name)
}

// ResourceExhausted notes that an attachment of the driver's failed with
// ResourceExhausted: the node may take fewer volumes than its CSINode says,
// so the driver is asked again at once (if its CSIDriver sets a period).
func (r *AllocatableRefresher) ResourceExhausted(driver string) {
	r.mu.Lock()
	r.exhausted[driver] = true
	r.mu.Unlock()
	r.enqueue(driver)
}

// Reconcile refreshes the driver's node info when it is due and returns
// when to look again (zero: not until an event).
func (r *AllocatableRefresher) Reconcile(ctx context.Context, driver string) (time.Duration, error) {
	d, err := r.opts.CSIDriver(ctx, driver)
	if apierrors.IsNotFound(err) {
		d, err = nil, nil
	}
	if err != nil {
		return 0, fmt.Errorf("getting CSIDriver %s: %w", driver, err)
	}
	_, registered := r.opts.Registry.Driver(driver)
	now := r.opts.Clock.Now()
	r.mu.Lock()
	plan := planAllocatableRefresh(registered, allocatablePeriod(d), r.last[driver], now, r.exhausted[driver])
	r.mu.Unlock()
	if plan.refresh {
		info, err := nodeGetInfo(ctx, r.opts.Registry, driver, r.opts.NodeGetInfoTimeout)
		if err == nil {
			err = validateTopology(info.Topology)
		}
		if err != nil {
			return 0, fmt.Errorf("refreshing the node info of CSI driver %s: %w", driver, err)
		}
		if _, still := r.opts.Registry.Driver(driver); !still {
			return 0, nil
		}
		r.opts.Installer.InstallDriver(driver, info)
		log.FromContext(ctx).V(1).Info("Refreshed CSI driver node info", "driver", driver, "maxVolumes", info.MaxVolumes)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if plan.refresh || plan.last.IsZero() {
		delete(r.exhausted, driver)
	}
	if plan.last.IsZero() {
		delete(r.last, driver)
	} else {
		r.last[driver] = plan.last
	}
	return plan.after, nil
}

// Installers hands each registration to all of its installers in order.
type Installers []DriverInstaller

// InstallDriver calls InstallDriver of each.
func (is Installers) InstallDriver(name string, info DriverNodeInfo) {
	for _, i := range is {
		i.InstallDriver(name, info)
	}
}

// UninstallDriver calls UninstallDriver of each.
func (is Installers) UninstallDriver(name string) {
	for _, i := range is {
		i.UninstallDriver(name)
	}
}
