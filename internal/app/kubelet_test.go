package app

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

func TestKubeletPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  v1alpha1.NodeletConfiguration
		want []string
	}{
		{name: "the defaults are the kubelet's",
			cfg:  v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/pods", CgroupDriver: "cgroupfs"},
			want: []string{`podLogsDir "/var/log/pods"`, `cgroupRoot "" (its kubepods cgroup is /kubepods)`}},
		{name: "the root cgroup named as a path, and the log directory with a trailing slash",
			cfg:  v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/pods/", CgroupRoot: "/", CgroupDriver: "cgroupfs"},
			want: []string{`podLogsDir "/var/log/pods/"`, `cgroupRoot "/" (its kubepods cgroup is /kubepods)`}},
		{name: "systemd's root slice",
			cfg:  v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/nodelet-pods", CgroupRoot: "-.slice", CgroupDriver: "systemd"},
			want: []string{`cgroupRoot "-.slice" (its kubepods cgroup is /kubepods.slice)`}},
		{name: "the DaemonSet's own paths",
			cfg: v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/nodelet-pods", CgroupRoot: "/nodelet", CgroupDriver: "cgroupfs"}},
		{name: "systemd with a slice of its own",
			cfg: v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/nodelet-pods", CgroupRoot: "nodelet.slice", CgroupDriver: "systemd"}},
		{name: "no kubepods without cgroupsPerQOS",
			cfg: v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/nodelet-pods", CgroupsPerQOS: ptr.To(false), CgroupDriver: "cgroupfs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kubeletPaths(&tc.cfg)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("kubeletPaths = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckKubeletPaths(t *testing.T) {
	host := t.TempDir()
	cfg := &v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/pods", CgroupDriver: "cgroupfs", HostRoot: host}
	if err := checkKubeletPaths(cfg); err != nil {
		t.Errorf("refused without a kubelet: %v", err)
	}

	sock := filepath.Join(host, kubeletPodResourcesSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	err = checkKubeletPaths(cfg)
	if err == nil || !strings.Contains(err.Error(), "a kubelet runs on this host") || !strings.Contains(err.Error(), `podLogsDir "/var/log/pods"`) {
		t.Errorf("with a kubelet answering: %v", err)
	}
	own := &v1alpha1.NodeletConfiguration{PodLogsDir: "/var/log/nodelet-pods", CgroupRoot: "/nodelet", CgroupDriver: "cgroupfs", HostRoot: host}
	if err := checkKubeletPaths(own); err != nil {
		t.Errorf("refused paths of its own beside a kubelet: %v", err)
	}

	// A socket left by a kubelet that stopped answers nothing.
	if ul, ok := l.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the stale socket is gone: %v", err)
	}
	if err := checkKubeletPaths(cfg); err != nil {
		t.Errorf("refused beside a stopped kubelet's socket: %v", err)
	}
}
