package deviceplugin_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/deviceplugin"
	fakeplugin "github.com/nodelet/nodelet/test/deviceplugin"
)

// TestPluginWatcherRegistration registers a device plugin through the
// plugin watcher on plugins_registry, as the kubelet takes them besides
// kubelet.sock: its devices are counted, its options asked for (a
// PreStartContainer call), its socket's removal makes them unhealthy, and
// a new registration brings them back.
func TestPluginWatcherRegistration(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := shortDir(t)
	m := start(t, ctx, dir, time.Hour)
	registry := filepath.Join(filepath.Dir(dir), csi.PluginsRegistryDir)
	w := csi.NewWatcher(csi.WatcherOptions{
		Dir:         registry,
		Registry:    csi.NewRegistry(),
		Handlers:    map[string]csi.PluginHandler{registerapi.DevicePlugin: m},
		RetryPeriod: 50 * time.Millisecond,
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Start(ctx); err != nil {
			t.Errorf("watcher: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the registry directory", func() bool { _, err := os.Stat(registry); return err == nil })

	p := &fakeplugin.Plugin{Dir: dir, RegistryDir: registry, Resource: gpu, Endpoint: "gpu.sock", Devices: []string{"dev-0", "dev-1"}, PreStartRequired: true}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	waitFor(t, "two healthy devices", func() bool { c, a, _ := counts(m); return c == 2 && a == 2 })
	if got := p.Registered(); !slices.Equal(got, []bool{true}) {
		t.Errorf("the watcher answered %v, want one accepted registration", got)
	}
	pod := gpuPod("a", 1)
	if err := m.Allocate(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if env := envOf(t, m, pod); env == "" {
		t.Error("the pod got no device")
	}
	if len(p.PreStarts()) != 1 {
		t.Errorf("PreStartContainer called %d times, want 1: the plugin's options were not asked for", len(p.PreStarts()))
	}

	p.Stop()
	waitFor(t, "devices unhealthy once the plugin is gone", func() bool { c, a, _ := counts(m); return c == 2 && a == 0 })
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the devices back", func() bool { c, a, _ := counts(m); return c == 2 && a == 2 })
}

func TestValidatePluginWatcherRegistration(t *testing.T) {
	m, err := deviceplugin.New(deviceplugin.Options{Dir: shortDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, resource, endpoint string
		versions                 []string
		want                     string
	}{
		{name: "valid", resource: gpu, endpoint: "/var/lib/kubelet/device-plugins/gpu.sock", versions: []string{"v1beta1"}},
		{name: "another version", resource: gpu, endpoint: "/x.sock", versions: []string{"v1"}, want: "supports API versions"},
		{name: "not an extended resource", resource: "cpu", endpoint: "/x.sock", versions: []string{"v1beta1"}, want: "not an extended resource name"},
		{name: "a relative endpoint", resource: gpu, endpoint: "gpu.sock", versions: []string{"v1beta1"}, want: "not an absolute path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := m.ValidatePlugin(tc.resource, tc.endpoint, tc.versions)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidatePlugin: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidatePlugin = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if err := m.RegisterPlugin(gpu, "/x.sock", []string{"v1beta1"}); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("RegisterPlugin before Start = %v, want an error", err)
	}
}
