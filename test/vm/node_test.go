package vm

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestPodSlice(t *testing.T) {
	uid := "0f2b5a3c-1d2e-4f50-8a9b-0c1d2e3f4a5b"
	for _, tc := range []struct {
		qos  corev1.PodQOSClass
		want string
	}{
		{corev1.PodQOSGuaranteed, "/sys/fs/cgroup/kubepods.slice/kubepods-pod0f2b5a3c_1d2e_4f50_8a9b_0c1d2e3f4a5b.slice"},
		{corev1.PodQOSBurstable, "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2b5a3c_1d2e_4f50_8a9b_0c1d2e3f4a5b.slice"},
		{corev1.PodQOSBestEffort, "/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f2b5a3c_1d2e_4f50_8a9b_0c1d2e3f4a5b.slice"},
	} {
		if got := PodSlice(tc.qos, "0f2b5a3c-1d2e-4f50-8a9b-0c1d2e3f4a5b"); got != tc.want {
			t.Errorf("PodSlice(%s, %s) = %s, want %s", tc.qos, uid, got, tc.want)
		}
	}
	if got, want := ContainerScope("/s/p.slice", "containerd://abc"), "/s/p.slice/cri-containerd-abc.scope"; got != want {
		t.Errorf("ContainerScope = %s, want %s", got, want)
	}
}

func TestParseCPUMax(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    CPUMax
		wantErr bool
	}{
		{in: "max 100000\n", want: CPUMax{Quota: -1, Period: 100000}},
		{in: "20000 100000", want: CPUMax{Quota: 20000, Period: 100000}},
		{in: "20000", wantErr: true},
		{in: "x 100000", wantErr: true},
		{in: "max y", wantErr: true},
	} {
		got, err := ParseCPUMax(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("ParseCPUMax(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestMilliCPUToShares(t *testing.T) {
	for milli, want := range map[int64]uint64{0: 2, 1: 2, 100: 102, 200: 204, 1000: 1024} {
		if got := MilliCPUToShares(milli); got != want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", milli, got, want)
		}
	}
}

func TestParseKeyValues(t *testing.T) {
	got := ParseKeyValues("ActiveState=active\nMainPID=42\n\noom 0\noom_kill 3\nnoise\n")
	want := map[string]string{"ActiveState": "active", "MainPID": "42", "oom": "0", "oom_kill": "3"}
	if len(got) != len(want) {
		t.Fatalf("ParseKeyValues = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ParseKeyValues[%s] = %q, want %q", k, got[k], v)
		}
	}
}

func TestKubeletConfig(t *testing.T) {
	data, err := KubeletConfig(NodeConfig{Port: 10255, PodPidsLimit: 1024, EvictionMemoryAvailable: "300Mi"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("the configuration is not YAML: %v\n%s", err, data)
	}
	for k, want := range map[string]any{
		"kind": "KubeletConfiguration", "cgroupDriver": "systemd", "port": float64(10255), "podPidsLimit": float64(1024),
	} {
		if cfg[k] != want {
			t.Errorf("%s = %v, want %v", k, cfg[k], want)
		}
	}
	if !strings.Contains(string(data), "memory.available: 300Mi") {
		t.Errorf("no memory.available threshold in\n%s", data)
	}
}

func TestQemuArgs(t *testing.T) {
	o := Options{ImageDir: "/img", WorkDir: "/w", ShareDir: "/share", CPUs: 2, MemoryMiB: 3072, SSHPort: 2222, NodeAPIPort: 10250}
	args := QemuArgs(o)
	value := func(flag string) string {
		i := slices.Index(args, flag)
		if i < 0 || i+1 == len(args) {
			t.Fatalf("no %s in %v", flag, args)
		}
		return args[i+1]
	}
	if got := value("-accel"); !strings.HasPrefix(got, "tcg") {
		t.Errorf("-accel %s: want software emulation (no KVM here)", got)
	}
	if got := value("-kernel"); got != "/img/vmlinuz" {
		t.Errorf("-kernel %s", got)
	}
	if got := value("-drive"); !strings.Contains(got, "file=/w/overlay.qcow2") {
		t.Errorf("-drive %s: want the run's overlay, never the base image", got)
	}
	netdev := value("-netdev")
	for _, want := range []string{"hostfwd=tcp:127.0.0.1:2222-:22", "hostfwd=tcp:10.253.1.15:10250-10.253.1.15:10250", "net=10.253.1.0/24"} {
		if !strings.Contains(netdev, want) {
			t.Errorf("-netdev %s: no %s", netdev, want)
		}
	}
	if got := value("-virtfs"); !strings.Contains(got, "path=/share") || !strings.Contains(got, "readonly=on") {
		t.Errorf("-virtfs %s: want /share read-only", got)
	}
	if got := value("-append"); !strings.Contains(got, "console=ttyS0") || !strings.Contains(got, "root=/dev/vda") {
		t.Errorf("-append %s", got)
	}
	ssh := SSHArgs(o)
	if ssh[len(ssh)-1] != "root@127.0.0.1" || !slices.Contains(ssh, "2222") || !slices.Contains(ssh, "/img/id_ed25519") {
		t.Errorf("SSHArgs = %v", ssh)
	}
}

func TestMemoryAvailable(t *testing.T) {
	got, err := MemoryAvailable("MemTotal:        3000000 kB\nMemFree: 1 kB\n", "anon 100000000\nfile 50000000\ninactive_file 20000000\nshmem 1\n")
	if want := int64(3000000<<10 - 130000000); err != nil || got != want {
		t.Errorf("MemoryAvailable = %d, %v; want %d", got, err, want)
	}
	if _, err := MemoryAvailable("MemFree: 1 kB\n", "anon 1\nfile 1\ninactive_file 1\n"); err == nil {
		t.Error("no MemTotal: want an error")
	}
	if _, err := MemoryAvailable("MemTotal: 1 kB\n", "anon 1\nfile 1\n"); err == nil {
		t.Error("no inactive_file: want an error")
	}
}
