package dra

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
)

var (
	t0      = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gpu0    = DeviceKey{Pool: "node", Device: "gpu-0"}
	gpu1    = DeviceKey{Pool: "node", Device: "gpu-1"}
	healthy = v1.ResourceHealthStatusHealthy
	sick    = v1.ResourceHealthStatusUnhealthy
	unknown = v1.ResourceHealthStatusUnknown
)

func TestReportedHealth(t *testing.T) {
	long := strings.Repeat("x", v1.ResourceHealthMessageMaxLength+10)
	cases := []struct {
		name string
		in   *drahealthv1.DeviceHealth
		want DeviceHealth
	}{
		{name: "healthy with the default timeout",
			in:   &drahealthv1.DeviceHealth{Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: "gpu-0"}, Health: drahealthv1.HealthStatus_HEALTHY, LastUpdatedTime: 42},
			want: DeviceHealth{Health: healthy, Updated: t0, Timeout: DefaultHealthTimeout}},
		{name: "unhealthy with a message and a timeout",
			in: &drahealthv1.DeviceHealth{Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: "gpu-0"}, Health: drahealthv1.HealthStatus_UNHEALTHY,
				Message: "ECC errors", HealthCheckTimeoutSeconds: 5},
			want: DeviceHealth{Health: sick, Message: "ECC errors", Updated: t0, Timeout: 5 * time.Second}},
		{name: "unknown, a negative timeout",
			in:   &drahealthv1.DeviceHealth{Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: "gpu-0"}, HealthCheckTimeoutSeconds: -3},
			want: DeviceHealth{Health: unknown, Updated: t0, Timeout: DefaultHealthTimeout}},
		{name: "a health nodelet does not know",
			in:   &drahealthv1.DeviceHealth{Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: "gpu-0"}, Health: 7},
			want: DeviceHealth{Health: unknown, Updated: t0, Timeout: DefaultHealthTimeout}},
		{name: "a message too long",
			in: &drahealthv1.DeviceHealth{Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: "gpu-0"}, Health: drahealthv1.HealthStatus_UNHEALTHY,
				Message: long},
			want: DeviceHealth{Health: sick, Message: long[:v1.ResourceHealthMessageMaxLength-3] + "...", Updated: t0, Timeout: DefaultHealthTimeout}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key, got := ReportedHealth(tc.in, t0)
			if key != gpu0 {
				t.Errorf("key %v, want %v", key, gpu0)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("health (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHealthAt(t *testing.T) {
	known := map[DeviceKey]DeviceHealth{
		gpu0: {Health: sick, Message: "hot", Updated: t0, Timeout: 10 * time.Second},
	}
	cases := []struct {
		name        string
		key         DeviceKey
		at          time.Time
		want        v1.ResourceHealthStatus
		wantMessage string
	}{
		{name: "fresh", key: gpu0, at: t0.Add(time.Second), want: sick, wantMessage: "hot"},
		{name: "at its timeout", key: gpu0, at: t0.Add(10 * time.Second), want: sick, wantMessage: "hot"},
		{name: "past its timeout", key: gpu0, at: t0.Add(11 * time.Second), want: unknown},
		{name: "never reported", key: gpu1, at: t0, want: unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, msg := HealthAt(known, tc.key, tc.at)
			if h != tc.want || msg != tc.wantMessage {
				t.Errorf("got %s %q, want %s %q", h, msg, tc.want, tc.wantMessage)
			}
		})
	}
}

func TestApplyHealthReport(t *testing.T) {
	at := t0.Add
	dh := func(h v1.ResourceHealthStatus, msg string, updated time.Time) DeviceHealth {
		return DeviceHealth{Health: h, Message: msg, Updated: updated, Timeout: 10 * time.Second}
	}
	cases := []struct {
		name        string
		known       map[DeviceKey]DeviceHealth
		report      map[DeviceKey]DeviceHealth
		now         time.Time
		want        map[DeviceKey]DeviceHealth
		wantChanged []DeviceKey
	}{
		{name: "a first report",
			report:      map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0), gpu1: dh(sick, "hot", t0)},
			now:         t0,
			want:        map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0), gpu1: dh(sick, "hot", t0)},
			wantChanged: []DeviceKey{gpu0, gpu1}},
		{name: "a first report of an unknown device changes nothing",
			report: map[DeviceKey]DeviceHealth{gpu0: dh(unknown, "", t0)},
			now:    t0,
			want:   map[DeviceKey]DeviceHealth{gpu0: dh(unknown, "", t0)}},
		{name: "the same again is no change",
			known:  map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0)},
			report: map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(5*time.Second))},
			now:    at(5 * time.Second),
			want:   map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(5*time.Second))}},
		{name: "turning unhealthy",
			known:       map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0)},
			report:      map[DeviceKey]DeviceHealth{gpu0: dh(sick, "ECC", at(time.Second))},
			now:         at(time.Second),
			want:        map[DeviceKey]DeviceHealth{gpu0: dh(sick, "ECC", at(time.Second))},
			wantChanged: []DeviceKey{gpu0}},
		{name: "a new message alone",
			known:       map[DeviceKey]DeviceHealth{gpu0: dh(sick, "ECC", t0)},
			report:      map[DeviceKey]DeviceHealth{gpu0: dh(sick, "memory corruption", at(time.Second))},
			now:         at(time.Second),
			want:        map[DeviceKey]DeviceHealth{gpu0: dh(sick, "memory corruption", at(time.Second))},
			wantChanged: []DeviceKey{gpu0}},
		{name: "reported again after its timeout",
			known:       map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0)},
			report:      map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(time.Minute))},
			now:         at(time.Minute),
			want:        map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(time.Minute))},
			wantChanged: []DeviceKey{gpu0}},
		{name: "a device left out keeps its health within its timeout",
			known:  map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0), gpu1: dh(sick, "", t0)},
			report: map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(5*time.Second))},
			now:    at(5 * time.Second),
			want:   map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(5*time.Second)), gpu1: dh(sick, "", t0)}},
		{name: "a device left out past its timeout is dropped",
			known:       map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0), gpu1: dh(sick, "", t0)},
			report:      map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(11*time.Second))},
			now:         at(11 * time.Second),
			want:        map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", at(11*time.Second))},
			wantChanged: []DeviceKey{gpu0, gpu1}},
		{name: "an unknown device past its timeout goes quietly",
			known: map[DeviceKey]DeviceHealth{gpu1: dh(unknown, "", t0)},
			now:   at(11 * time.Second),
			want:  map[DeviceKey]DeviceHealth{}},
		{name: "no report: only expiry",
			known:       map[DeviceKey]DeviceHealth{gpu0: dh(healthy, "", t0), gpu1: dh(sick, "", at(5*time.Second))},
			now:         at(11 * time.Second),
			want:        map[DeviceKey]DeviceHealth{gpu1: dh(sick, "", at(5*time.Second))},
			wantChanged: []DeviceKey{gpu0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.known)
			got, changed, ignored := ApplyHealthReport(tc.known, tc.report, tc.now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
			if !slices.Equal(changed, tc.wantChanged) {
				t.Errorf("changed %v, want %v", changed, tc.wantChanged)
			}
			if ignored != 0 {
				t.Errorf("ignored %d", ignored)
			}
			if diff := cmp.Diff(before, maps.Clone(tc.known)); diff != "" {
				t.Errorf("the known devices were modified:\n%s", diff)
			}
		})
	}
}

func TestApplyHealthReportCapsNewDevices(t *testing.T) {
	known := map[DeviceKey]DeviceHealth{}
	for i := range maxHealthDevicesPerDriver {
		known[DeviceKey{Pool: "p", Device: fmt.Sprintf("d%d", i)}] = DeviceHealth{Health: healthy, Updated: t0, Timeout: time.Hour}
	}
	someKnown := DeviceKey{Pool: "p", Device: "d7"}
	report := map[DeviceKey]DeviceHealth{
		someKnown: {Health: sick, Updated: t0, Timeout: time.Hour},
		gpu0:      {Health: sick, Updated: t0, Timeout: time.Hour},
	}
	got, changed, ignored := ApplyHealthReport(known, report, t0)
	if ignored != 1 || len(got) != maxHealthDevicesPerDriver || got[someKnown].Health != sick {
		t.Errorf("ignored %d, %d devices, known one %s: want 1 ignored, the cap, and the known one updated", ignored, len(got), got[someKnown].Health)
	}
	if !slices.Equal(changed, []DeviceKey{someKnown}) {
		t.Errorf("changed %v", changed)
	}
}

// TestHealthCache checks the cache's reads, its notices, and the expiry
// of a device not reported within its timeout.
func TestHealthCache(t *testing.T) {
	notices := make(chan []DeviceKey, 10)
	h := NewHealth(logr.Discard(), func(driver string, devices []DeviceKey) {
		if driver != "gpu.example.com" {
			t.Errorf("notice for driver %s", driver)
		}
		notices <- devices
	})
	defer h.Close()
	next := func(what string) []DeviceKey {
		t.Helper()
		select {
		case d := <-notices:
			return d
		case <-time.After(5 * time.Second):
			t.Fatalf("no notice of %s", what)
			return nil
		}
	}
	report := func(health drahealthv1.HealthStatus, msg string, timeout int64) {
		h.Report("gpu.example.com", []*drahealthv1.DeviceHealth{{
			Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: "gpu-0"}, Health: health, Message: msg, HealthCheckTimeoutSeconds: timeout,
		}})
	}
	report(drahealthv1.HealthStatus_HEALTHY, "", 0)
	if got := next("a first report"); !slices.Equal(got, []DeviceKey{gpu0}) {
		t.Fatalf("notice %v", got)
	}
	if got, msg := h.Device("gpu.example.com", gpu0); got != healthy || msg != "" {
		t.Errorf("read %s %q", got, msg)
	}
	report(drahealthv1.HealthStatus_HEALTHY, "", 0)
	report(drahealthv1.HealthStatus_UNHEALTHY, "ECC", 1)
	if got := next("turning unhealthy"); !slices.Equal(got, []DeviceKey{gpu0}) {
		t.Fatalf("notice %v", got)
	}
	if got, msg := h.Device("gpu.example.com", gpu0); got != sick || msg != "ECC" {
		t.Errorf("read %s %q", got, msg)
	}
	// Not reported again within its 1 s timeout: Unknown, and told.
	if got := next("the expiry"); !slices.Equal(got, []DeviceKey{gpu0}) {
		t.Fatalf("notice %v", got)
	}
	if got, msg := h.Device("gpu.example.com", gpu0); got != unknown || msg != "" {
		t.Errorf("read %s %q after the timeout", got, msg)
	}
	report(drahealthv1.HealthStatus_HEALTHY, "", 0)
	next("the report after the expiry")
	h.Forget("gpu.example.com")
	if got := next("the driver forgotten"); !slices.Equal(got, []DeviceKey{gpu0}) {
		t.Fatalf("notice %v", got)
	}
	if got, _ := h.Device("gpu.example.com", gpu0); got != unknown {
		t.Errorf("read %s after the driver was forgotten", got)
	}
	select {
	case d := <-notices:
		t.Errorf("unexpected notice %v", d)
	default:
	}
}

// reportOne reports one device of pool "node" of the driver.
func reportOne(h *Health, driver, device string, healthy bool, msg string) {
	st := drahealthv1.HealthStatus_UNHEALTHY
	if healthy {
		st = drahealthv1.HealthStatus_HEALTHY
	}
	h.Report(driver, []*drahealthv1.DeviceHealth{{Device: &drahealthv1.DeviceIdentifier{PoolName: "node", DeviceName: device}, Health: st, Message: msg}})
}
