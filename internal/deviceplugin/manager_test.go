package deviceplugin_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/deviceplugin"
	fakeplugin "github.com/nodelet/nodelet/test/deviceplugin"
)

const gpu = "example.com/gpu"

// shortDir is a directory short enough for unix socket paths.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return filepath.Join(d, deviceplugin.DirName)
}

func gpuPod(uid string, n int64) *corev1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{gpu: q}, Requests: corev1.ResourceList{gpu: q},
		}}}},
	}
}

func start(t *testing.T, ctx context.Context, dir string, grace time.Duration) *deviceplugin.Manager {
	t.Helper()
	m, err := deviceplugin.New(deviceplugin.Options{Dir: dir, GracePeriod: grace})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the registration socket", func() bool {
		_, err := os.Stat(filepath.Join(dir, deviceplugin.SocketName))
		return err == nil
	})
	return m
}

func hasResource(l corev1.ResourceList, name corev1.ResourceName) bool {
	_, ok := l[name]
	return ok
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func counts(m *deviceplugin.Manager) (capacity, allocatable int64, removed bool) {
	c, a, r := m.Resources()
	q, ok := c[gpu]
	if ok {
		capacity = q.Value()
	}
	q = a[gpu]
	return capacity, q.Value(), len(r) == 1 && r[0] == gpu && !ok
}

func envOf(t *testing.T, m *deviceplugin.Manager, pod *corev1.Pod) string {
	t.Helper()
	cfg := &runtimeapi.ContainerConfig{}
	if err := m.ContainerDevices(context.Background(), pod, "c", cfg); err != nil {
		t.Fatal(err)
	}
	env, err := m.ContainerEnv(pod, "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range cfg.Envs {
		if kv.Key == fakeplugin.EnvName {
			if env[fakeplugin.EnvName] != string(kv.Value) {
				t.Errorf("ContainerEnv gives %s=%q, the config %q", fakeplugin.EnvName, env[fakeplugin.EnvName], kv.Value)
			}
			return string(kv.Value)
		}
	}
	if len(env) != 0 {
		t.Errorf("ContainerEnv of a container without devices: %v", env)
	}
	return ""
}

func TestManagerLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := shortDir(t)
	m := start(t, ctx, dir, 300*time.Millisecond)
	p := &fakeplugin.Plugin{Dir: dir, Resource: gpu, Endpoint: "gpu.sock", Devices: []string{"dev-0", "dev-1"}, PreStartRequired: true}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	waitFor(t, "two healthy devices", func() bool { c, a, _ := counts(m); return c == 2 && a == 2 })

	a, b, c := gpuPod("a", 1), gpuPod("b", 1), gpuPod("c", 1)
	if err := m.Allocate(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Allocate(ctx, b, map[types.UID]bool{"a": true}); err != nil {
		t.Fatal(err)
	}
	envA, envB := envOf(t, m, a), envOf(t, m, b)
	if envA == "" || envB == "" || envA == envB {
		t.Fatalf("pods got devices %q and %q, want two different ones", envA, envB)
	}
	if len(p.PreStarts()) != 2 {
		t.Errorf("PreStartContainer called %d times, want 2", len(p.PreStarts()))
	}
	err := m.Allocate(ctx, c, map[types.UID]bool{"a": true, "b": true})
	if err == nil || !strings.Contains(err.Error(), "requested number of devices unavailable for example.com/gpu. Requested: 1, Available: 0") {
		t.Fatalf("third pod: %v, want no device left", err)
	}
	if got := m.Assigned("c", "c"); len(got) != 0 {
		t.Errorf("a refused pod holds %v", got)
	}
	// Allocating again is a no-op.
	if err := m.Allocate(ctx, a, map[types.UID]bool{"b": true}); err != nil || envOf(t, m, a) != envA || len(p.Allocated()) != 2 {
		t.Fatalf("allocating again: %v, env %q, %d Allocate calls", err, envOf(t, m, a), len(p.Allocated()))
	}

	// A device turning unhealthy leaves capacity, not allocatable.
	p.SetHealthy("dev-1", false)
	waitFor(t, "one unhealthy device", func() bool { c, a, _ := counts(m); return c == 2 && a == 1 })
	p.SetHealthy("dev-1", true)
	waitFor(t, "the device healthy again", func() bool { c, a, _ := counts(m); return c == 2 && a == 2 })

	// A pod that is no longer active loses its devices at the next
	// allocation, and the new pod gets that device.
	if err := m.Allocate(ctx, c, map[types.UID]bool{"b": true}); err != nil {
		t.Fatal(err)
	}
	if envOf(t, m, c) != envA {
		t.Errorf("new pod got %q, want the freed %q", envOf(t, m, c), envA)
	}

	// The plugin stops: nothing allocatable at once, the resource goes
	// after the grace period; registering again restores it.
	p.Stop()
	waitFor(t, "devices unhealthy", func() bool { c, a, _ := counts(m); return c == 2 && a == 0 })
	waitFor(t, "the resource removed", func() bool { _, _, r := counts(m); return r })
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resource back", func() bool { c, a, r := counts(m); return c == 2 && a == 2 && !r })
}

func TestManagerRestartKeepsAssignments(t *testing.T) {
	ctx := context.Background()
	dir := shortDir(t)
	first, cancel := context.WithCancel(ctx)
	m, err := deviceplugin.New(deviceplugin.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Start(first) }()
	waitFor(t, "the registration socket", func() bool {
		_, err := os.Stat(filepath.Join(dir, deviceplugin.SocketName))
		return err == nil
	})
	p := &fakeplugin.Plugin{Dir: dir, Resource: gpu, Endpoint: "gpu.sock", Devices: []string{"dev-0", "dev-1", "dev-2"}, Preferred: true}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	waitFor(t, "healthy devices", func() bool { c, a, _ := counts(m); return c == 3 && a == 3 })
	a := gpuPod("a", 2)
	if err := m.Allocate(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	// The stand-in prefers the last devices.
	if got := envOf(t, m, a); got != "dev-2,dev-1" {
		t.Fatalf("env %q, want the preferred dev-2,dev-1", got)
	}
	cancel()
	<-done

	m2 := start(t, ctx, dir, time.Minute)
	// As the kubelet: the resource stays, with no devices until its
	// plugin registers again.
	if c, a, removed := counts(m2); c != 0 || a != 0 || removed {
		t.Errorf("after a restart, before the plugin registers: capacity %d allocatable %d (removed %v), want the resource at 0 and 0", c, a, removed)
	}
	if capacity, _, _ := m2.Resources(); !hasResource(capacity, gpu) {
		t.Errorf("after a restart the Node's capacity %v has no %s", capacity, gpu)
	}
	if got := envOf(t, m2, a); got != "dev-2,dev-1" {
		t.Fatalf("after a restart the pod has %q, want dev-2,dev-1", got)
	}
	if err := p.Register(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the devices after the plugin registered again", func() bool { c, a, _ := counts(m2); return c == 3 && a == 3 })
	b := gpuPod("b", 2)
	err = m2.Allocate(ctx, b, map[types.UID]bool{"a": true})
	if err == nil || !strings.Contains(err.Error(), "Requested: 2, Available: 1") {
		t.Fatalf("second pod: %v, want only one device left", err)
	}
	if len(p.Allocated()) != 1 {
		t.Errorf("%d Allocate calls, want 1 (the restart must not allocate again)", len(p.Allocated()))
	}
}

// TestManagerReportsDeviceHealth checks the health a pod's container
// status reports of its devices, and that the pod is named each time it
// changes: as the plugin lists it, Unknown once the plugin is gone.
func TestManagerReportsDeviceHealth(t *testing.T) {
	ctx := context.Background()
	dir := shortDir(t)
	changed := make(chan []types.UID, 10)
	m, err := deviceplugin.New(deviceplugin.Options{Dir: dir, GracePeriod: time.Minute, OnHealthChange: func(pods []types.UID) { changed <- pods }})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Start(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	p := &fakeplugin.Plugin{Dir: dir, Resource: gpu, Endpoint: "gpu.sock", Devices: []string{"dev-0", "dev-1"}}
	waitFor(t, "the registration socket", func() bool {
		_, err := os.Stat(filepath.Join(dir, deviceplugin.SocketName))
		return err == nil
	})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	waitFor(t, "two healthy devices", func() bool { c, a, _ := counts(m); return c == 2 && a == 2 })
	pod := gpuPod("a", 1)
	if err := m.Allocate(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	dev := m.Assigned("a", "c")[gpu][0]
	statusIs := func(what string, h corev1.ResourceHealthStatus) {
		t.Helper()
		want := map[string][]corev1.ResourceStatus{"c": {{Name: gpu, Resources: []corev1.ResourceHealth{{ResourceID: corev1.ResourceID(dev), Health: h}}}}}
		if diff := cmp.Diff(want, m.ResourceStatus(pod)); diff != "" {
			t.Errorf("%s: allocatedResourcesStatus (-want +got):\n%s", what, diff)
		}
	}
	podNamed := func(what string) {
		t.Helper()
		select {
		case got := <-changed:
			if !slices.Equal(got, []types.UID{"a"}) {
				t.Errorf("%s: pods %v, want a", what, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no health change", what)
		}
	}
	statusIs("healthy", corev1.ResourceHealthStatusHealthy)

	p.SetHealthy(dev, false)
	podNamed("the device unhealthy")
	statusIs("unhealthy", corev1.ResourceHealthStatusUnhealthy)

	other := "dev-0"
	if dev == other {
		other = "dev-1"
	}
	p.SetHealthy(other, false)
	waitFor(t, "the other device unhealthy", func() bool { _, a, _ := counts(m); return a == 0 })
	select {
	case got := <-changed:
		t.Errorf("pods %v named for a device they do not hold", got)
	default:
	}

	p.Stop()
	podNamed("the plugin gone")
	statusIs("the plugin gone", corev1.ResourceHealthStatusUnknown)

	if got := m.ResourceStatus(gpuPod("b", 1)); got != nil {
		t.Errorf("a pod without devices: %v", got)
	}
}
