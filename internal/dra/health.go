package dra

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
)

const (
	// DefaultHealthTimeout is how long a device's reported health holds
	// when its driver gives no health_check_timeout_seconds, as the
	// kubelet's: a device not reported again within it is Unknown.
	DefaultHealthTimeout = 30 * time.Second
	// maxHealthDevicesPerDriver bounds the devices a driver's reports may
	// add, as the kubelet's: reports are not checked against the driver's
	// ResourceSlices, and a driver inventing device names must not grow
	// the node's memory without end. Devices known already are always
	// updated.
	maxHealthDevicesPerDriver = 16384
)

// DeviceKey names one device of a driver.
type DeviceKey struct {
	Pool, Device string
}

// DeviceHealth is what a driver last said of one of its devices.
type DeviceHealth struct {
	Health  v1.ResourceHealthStatus
	Message string
	// Updated is when nodelet got the report; Timeout how long it holds.
	Updated time.Time
	Timeout time.Duration
}

// stale reports whether the health no longer holds at now.
func (h DeviceHealth) stale(now time.Time) bool {
	return now.Sub(h.Updated) > h.Timeout
}

// ReportedHealth returns a device's entry of a NodeWatchResources answer,
// received at now, as the kubelet reads it: an unknown health is Unknown,
// a timeout that is not positive is DefaultHealthTimeout, and a message
// longer than the API allows is cut to it, ending with "...". The
// driver's own last_updated_time is not used: the timeout counts from
// when nodelet heard of the device.
func ReportedHealth(d *drahealthv1.DeviceHealth, now time.Time) (DeviceKey, DeviceHealth) {
	h := DeviceHealth{Health: v1.ResourceHealthStatusUnknown, Message: truncateHealthMessage(d.GetMessage()), Updated: now, Timeout: DefaultHealthTimeout}
	switch d.GetHealth() {
	case drahealthv1.HealthStatus_HEALTHY:
		h.Health = v1.ResourceHealthStatusHealthy
	case drahealthv1.HealthStatus_UNHEALTHY:
		h.Health = v1.ResourceHealthStatusUnhealthy
	}
	if s := d.GetHealthCheckTimeoutSeconds(); s > 0 {
		h.Timeout = time.Duration(s) * time.Second
	}
	return DeviceKey{Pool: d.GetDevice().GetPoolName(), Device: d.GetDevice().GetDeviceName()}, h
}

func truncateHealthMessage(m string) string {
	if len(m) <= v1.ResourceHealthMessageMaxLength {
		return m
	}
	return m[:v1.ResourceHealthMessageMaxLength-3] + "..."
}

// HealthAt is a device's health as read at now: Unknown, without a
// message, when the driver never reported it or its report is older than
// its timeout.
func HealthAt(known map[DeviceKey]DeviceHealth, key DeviceKey, now time.Time) (v1.ResourceHealthStatus, string) {
	h, ok := known[key]
	if !ok || h.stale(now) {
		return v1.ResourceHealthStatusUnknown, ""
	}
	return h.Health, h.Message
}

// ApplyHealthReport returns a driver's devices after it reported those of
// report at now, as the kubelet keeps them, and the devices whose health
// or message, as read, changed, sorted: a reported device is updated; a
// device not reported whose last report is past its timeout is dropped (it
// reads Unknown), a change unless it was Unknown already. A report without
// devices only drops those past their timeout. New devices past
// maxHealthDevicesPerDriver are left out; ignored counts them. known is
// not modified.
func ApplyHealthReport(known, report map[DeviceKey]DeviceHealth, now time.Time) (next map[DeviceKey]DeviceHealth, changed []DeviceKey, ignored int) {
	next = maps.Clone(known)
	if next == nil {
		next = map[DeviceKey]DeviceHealth{}
	}
	for _, key := range slices.SortedFunc(maps.Keys(report), compareDeviceKeys) {
		h := report[key]
		if _, ok := known[key]; !ok && len(next) >= maxHealthDevicesPerDriver {
			ignored++
			continue
		}
		if oldHealth, oldMessage := HealthAt(known, key, now); oldHealth != h.Health || oldMessage != h.Message {
			changed = append(changed, key)
		}
		next[key] = h
	}
	for key, h := range known {
		if _, reported := report[key]; reported || !h.stale(now) {
			continue
		}
		delete(next, key)
		if h.Health != v1.ResourceHealthStatusUnknown {
			changed = append(changed, key)
		}
	}
	slices.SortFunc(changed, compareDeviceKeys)
	return next, slices.Compact(changed), ignored
}

func compareDeviceKeys(a, b DeviceKey) int {
	if c := strings.Compare(a.Pool, b.Pool); c != 0 {
		return c
	}
	return strings.Compare(a.Device, b.Device)
}

// nextExpiry is when the first device of known that reads other than
// Unknown goes past its timeout, if one does.
func nextExpiry(known map[DeviceKey]DeviceHealth) (time.Time, bool) {
	var first time.Time
	found := false
	for _, h := range known {
		if h.Health == v1.ResourceHealthStatusUnknown {
			continue
		}
		// Past the timeout means after it: one tick later.
		at := h.Updated.Add(h.Timeout + time.Millisecond)
		if !found || at.Before(first) {
			first, found = at, true
		}
	}
	return first, found
}

// HealthChangeFunc is told which devices of a driver changed health, as
// read; it must not block.
type HealthChangeFunc func(driver string, devices []DeviceKey)

// Health is the node's cache of its DRA devices' health, by driver, fed by
// the drivers' NodeWatchResources streams (see Drivers). A device whose
// report is older than its timeout reads Unknown, and its readers are told
// when that happens; so does every device of a driver whose stream ended.
// It is safe for concurrent use.
type Health struct {
	log      logr.Logger
	onChange HealthChangeFunc
	now      func() time.Time

	mu      sync.Mutex
	drivers map[string]map[DeviceKey]DeviceHealth
	// timer fires at the next expiry; expiry is when it is set for.
	timer  *time.Timer
	expiry time.Time
}

// NewHealth returns an empty cache that tells onChange (which may be
// nil) of each change.
func NewHealth(log logr.Logger, onChange HealthChangeFunc) *Health {
	return &Health{log: log, onChange: onChange, now: time.Now, drivers: map[string]map[DeviceKey]DeviceHealth{}}
}

// Report records one NodeWatchResources answer of the driver.
func (h *Health) Report(driver string, devices []*drahealthv1.DeviceHealth) {
	now := h.now()
	report := make(map[DeviceKey]DeviceHealth, len(devices))
	for _, d := range devices {
		key, dh := ReportedHealth(d, now)
		report[key] = dh
	}
	h.mu.Lock()
	next, changed, ignored := ApplyHealthReport(h.drivers[driver], report, now)
	h.drivers[driver] = next
	h.armLocked()
	h.mu.Unlock()
	if ignored > 0 {
		h.log.Error(nil, "DRA driver reported more devices than the health cache keeps, ignoring the new ones", "driver", driver, "limit", maxHealthDevicesPerDriver, "ignored", ignored)
	}
	h.notify(driver, changed)
}

// Forget drops what the driver reported: its devices read Unknown, as
// the kubelet's do once a driver's stream ended.
func (h *Health) Forget(driver string) {
	now := h.now()
	h.mu.Lock()
	var changed []DeviceKey
	for key, dh := range h.drivers[driver] {
		if dh.Health != v1.ResourceHealthStatusUnknown && !dh.stale(now) {
			changed = append(changed, key)
		}
	}
	delete(h.drivers, driver)
	h.armLocked()
	h.mu.Unlock()
	slices.SortFunc(changed, compareDeviceKeys)
	h.notify(driver, changed)
}

// Device returns a device's health and message as read now.
func (h *Health) Device(driver string, key DeviceKey) (v1.ResourceHealthStatus, string) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	return HealthAt(h.drivers[driver], key, now)
}

// expire drops the devices past their timeout and tells of those that
// read Unknown now.
func (h *Health) expire() {
	now := h.now()
	h.mu.Lock()
	h.expiry = time.Time{}
	changes := map[string][]DeviceKey{}
	for driver, known := range h.drivers {
		next, changed, _ := ApplyHealthReport(known, nil, now)
		h.drivers[driver] = next
		if len(changed) > 0 {
			changes[driver] = changed
		}
	}
	h.armLocked()
	h.mu.Unlock()
	for _, driver := range slices.Sorted(maps.Keys(changes)) {
		h.notify(driver, changes[driver])
	}
}

// armLocked sets the timer for the next expiry of any driver's device;
// h.mu is held.
func (h *Health) armLocked() {
	var first time.Time
	found := false
	for _, known := range h.drivers {
		if at, ok := nextExpiry(known); ok && (!found || at.Before(first)) {
			first, found = at, true
		}
	}
	if !found || (!h.expiry.IsZero() && !first.Before(h.expiry)) {
		return
	}
	if h.timer != nil {
		h.timer.Stop()
	}
	h.expiry = first
	h.timer = time.AfterFunc(time.Until(first), h.expire)
}

// Close stops the expiry timer.
func (h *Health) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
}

func (h *Health) notify(driver string, changed []DeviceKey) {
	if len(changed) == 0 {
		return
	}
	h.log.V(1).Info("DRA device health changed", "driver", driver, "devices", len(changed))
	if h.onChange != nil {
		h.onChange(driver, changed)
	}
}
