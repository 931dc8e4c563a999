package deviceplugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func TestValidateRegistration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     *pluginapi.RegisterRequest
		wantErr string
	}{
		{"ok", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "example.com/gpu", Endpoint: "gpu.sock"}, ""},
		{"old version", &pluginapi.RegisterRequest{Version: "v1alpha", ResourceName: "example.com/gpu", Endpoint: "gpu.sock"}, "unsupported device plugin API version"},
		{"no domain", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "gpu", Endpoint: "gpu.sock"}, "invalid resource name"},
		{"kubernetes.io", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "kubernetes.io/gpu", Endpoint: "gpu.sock"}, "invalid resource name"},
		{"sub kubernetes.io", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "node.kubernetes.io/gpu", Endpoint: "gpu.sock"}, "invalid resource name"},
		{"requests prefix", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "requests.example.com/gpu", Endpoint: "gpu.sock"}, "invalid resource name"},
		{"path outside", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "example.com/gpu", Endpoint: "../gpu.sock"}, "invalid endpoint"},
		{"absolute", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "example.com/gpu", Endpoint: "/tmp/gpu.sock"}, "invalid endpoint"},
		{"registration socket", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "example.com/gpu", Endpoint: "kubelet.sock"}, "invalid endpoint"},
		{"empty endpoint", &pluginapi.RegisterRequest{Version: "v1beta1", ResourceName: "example.com/gpu"}, "invalid endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateRegistration(tc.req)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestResourceLists(t *testing.T) {
	for _, tc := range []struct {
		name            string
		devices         map[string]map[string]bool
		wantCap, wantAl corev1.ResourceList
	}{
		{"none", nil, corev1.ResourceList{}, corev1.ResourceList{}},
		{"all healthy", map[string]map[string]bool{"example.com/gpu": {"a": true, "b": true}},
			corev1.ResourceList{"example.com/gpu": resource.MustParse("2")}, corev1.ResourceList{"example.com/gpu": resource.MustParse("2")}},
		{"capacity counts unhealthy devices", map[string]map[string]bool{"example.com/gpu": {"a": true, "b": false}},
			corev1.ResourceList{"example.com/gpu": resource.MustParse("2")}, corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}},
		{"stopped plugin", map[string]map[string]bool{"example.com/gpu": {"a": false, "b": false}, "example.com/nic": {"x": true}},
			corev1.ResourceList{"example.com/gpu": resource.MustParse("2"), "example.com/nic": resource.MustParse("1")},
			corev1.ResourceList{"example.com/gpu": resource.MustParse("0"), "example.com/nic": resource.MustParse("1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts := map[string]Counts{}
			for name, d := range tc.devices {
				counts[name] = CountDevices(d)
			}
			gotCap, gotAl := ResourceLists(counts)
			if !equalLists(gotCap, tc.wantCap) || !equalLists(gotAl, tc.wantAl) {
				t.Fatalf("got capacity %v allocatable %v, want %v %v", gotCap, gotAl, tc.wantCap, tc.wantAl)
			}
		})
	}
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if w, ok := b[k]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func TestPickDevices(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		n                         int
		devices                   map[string]bool
		inUse                     map[string]bool
		reusable, preferred, want []string
		wantErr                   string
	}{
		{name: "first free in order", n: 1, devices: map[string]bool{"b": true, "a": true}, want: []string{"a"}},
		{name: "skips devices in use", n: 1, devices: map[string]bool{"a": true, "b": true}, inUse: map[string]bool{"a": true}, want: []string{"b"}},
		{name: "skips unhealthy devices", n: 1, devices: map[string]bool{"a": false, "b": true}, want: []string{"b"}},
		{name: "too few", n: 2, devices: map[string]bool{"a": true, "b": true}, inUse: map[string]bool{"b": true},
			wantErr: "requested number of devices unavailable for example.com/gpu. Requested: 2, Available: 1"},
		{name: "none healthy", n: 1, devices: map[string]bool{"a": false},
			wantErr: "Requested: 1, Available: 0"},
		{name: "preferred first", n: 2, devices: map[string]bool{"a": true, "b": true, "c": true}, preferred: []string{"c", "b"}, want: []string{"c", "b"}},
		{name: "preferred in use is ignored", n: 1, devices: map[string]bool{"a": true, "b": true}, inUse: map[string]bool{"b": true}, preferred: []string{"b"}, want: []string{"a"}},
		{name: "init container's devices reused first", n: 2, devices: map[string]bool{"a": true, "b": true, "c": true}, inUse: map[string]bool{"c": true},
			reusable: []string{"c"}, want: []string{"c", "a"}},
		{name: "zero", n: 0, devices: map[string]bool{"a": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PickDevices("example.com/gpu", tc.n, tc.reusable, Available(tc.devices, tc.inUse), tc.preferred)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("picked (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNeed(t *testing.T) {
	c := &corev1.Container{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		"example.com/gpu": resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("1"), "example.com/other": resource.MustParse("1"),
	}}}
	got := Need(c, func(n string) bool { return n == "example.com/gpu" })
	if diff := cmp.Diff(map[string]int{"example.com/gpu": 2}, got); diff != "" {
		t.Fatalf("need (-want +got):\n%s", diff)
	}
}

func TestApplyResponses(t *testing.T) {
	cfg := &runtimeapi.ContainerConfig{
		Envs:   []*runtimeapi.KeyValue{{Key: "DEVICE_ID", Value: []byte("mine")}},
		Mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/v"}},
	}
	ApplyResponses(cfg, []*pluginapi.ContainerAllocateResponse{{
		Envs:        map[string]string{"DEVICE_ID": "dev-0", "B": "b"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/dev-lib", HostPath: "/opt/lib", ReadOnly: true}},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x0", HostPath: "/dev/null", Permissions: "rw"}},
		Annotations: map[string]string{"example.com/a": "1"},
		CdiDevices:  []*pluginapi.CDIDevice{{Name: "example.com/gpu=0"}},
	}})
	var env []string
	for _, kv := range cfg.Envs {
		env = append(env, kv.Key+"="+string(kv.Value))
	}
	if diff := cmp.Diff([]string{"B=b", "DEVICE_ID=dev-0", "DEVICE_ID=mine"}, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if len(cfg.Mounts) != 2 || cfg.Mounts[0].ContainerPath != "/dev-lib" || !cfg.Mounts[0].Readonly {
		t.Errorf("mounts: %v", cfg.Mounts)
	}
	if len(cfg.Devices) != 1 || cfg.Devices[0].HostPath != "/dev/null" || cfg.Devices[0].Permissions != "rw" {
		t.Errorf("devices: %v", cfg.Devices)
	}
	if cfg.Annotations["example.com/a"] != "1" || len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "example.com/gpu=0" {
		t.Errorf("annotations %v, CDI devices %v", cfg.Annotations, cfg.CDIDevices)
	}
}
