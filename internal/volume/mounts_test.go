package volume

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMounts(t *testing.T) {
	requireRoot(t)
	hostDir := t.TempDir()
	bidirectional := v1.MountPropagationBidirectional
	hostToContainer := v1.MountPropagationHostToContainer
	none := v1.MountPropagationNone
	bogus := v1.MountPropagationMode("Sideways")

	tests := []struct {
		name    string
		mounts  []v1.VolumeMount
		setup   func(t *testing.T, e *testEnv, pod *v1.Pod)
		want    func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount // volume mounts only
		check   func(t *testing.T, e *testEnv, pod *v1.Pod)
		wantErr string
	}{{
		name: "emptyDir read-write, hostPath read-only with propagation",
		mounts: []v1.VolumeMount{
			{Name: "scratch", MountPath: "/scratch"},
			{Name: "host", MountPath: "/host", ReadOnly: true, MountPropagation: &hostToContainer},
			{Name: "host", MountPath: "/host2", MountPropagation: &bidirectional},
			{Name: "host", MountPath: "/host3", MountPropagation: &none},
		},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			return []*runtimeapi.Mount{
				{ContainerPath: "/scratch", HostPath: e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch")},
				{ContainerPath: "/host", HostPath: hostDir, Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
				{ContainerPath: "/host2", HostPath: hostDir, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
				{ContainerPath: "/host3", HostPath: hostDir},
			}
		},
	}, {
		name:   "configMap volumes are always read-only",
		mounts: []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			return []*runtimeapi.Mount{{ContainerPath: "/etc/app", HostPath: e.m.volumeDir(pod.UID, configMapPlugin, "cfg"), Readonly: true}}
		},
	}, {
		name:   "subPath of a configMap key resolves to the current file",
		mounts: []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/app.conf", SubPath: "app.conf"}},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			return []*runtimeapi.Mount{{ContainerPath: "/etc/app.conf", HostPath: subPathTarget(e, pod, "cfg", 0), Readonly: true}}
		},
		check: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			if data, err := os.ReadFile(subPathTarget(e, pod, "cfg", 0)); err != nil || string(data) != "x" {
				t.Errorf("the mounted subPath reads %q, %v; want the key's value", data, err)
			}
		},
	}, {
		name:   "missing subPath is created inside the volume",
		mounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "a/b"}},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			return []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: subPathTarget(e, pod, "scratch", 0)}}
		},
		check: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			created := filepath.Join(e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch"), "a/b")
			if info, err := os.Stat(created); err != nil || info.Mode().Perm() != emptyDirMode {
				t.Fatalf("created subPath: %v, %v; want a directory with the volume's mode", info, err)
			}
			if err := os.WriteFile(filepath.Join(created, "marker"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(subPathTarget(e, pod, "scratch", 0), "marker")); err != nil {
				t.Errorf("the mount target does not show the subPath: %v", err)
			}
		},
	}, {
		name: "a link that stays inside the volume is followed, as the kubelet does",
		mounts: []v1.VolumeMount{
			{Name: "scratch", MountPath: "/a"},
			{Name: "scratch", MountPath: "/data", SubPath: "current/x"},
		},
		setup: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			vol := e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch")
			if err := os.MkdirAll(filepath.Join(vol, "v1", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(vol, "v1", "x", "marker"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("v1", filepath.Join(vol, "current")); err != nil {
				t.Fatal(err)
			}
		},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			return []*runtimeapi.Mount{
				{ContainerPath: "/a", HostPath: e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch")},
				{ContainerPath: "/data", HostPath: subPathTarget(e, pod, "scratch", 1)},
			}
		},
		check: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			if _, err := os.Stat(filepath.Join(subPathTarget(e, pod, "scratch", 1), "marker")); err != nil {
				t.Errorf("the mount target does not show the link's target: %v", err)
			}
		},
	}, {
		name:    "subPath with .. is refused",
		mounts:  []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "a/../../../etc"}},
		wantErr: `subPath "a/../../../etc" must not contain '..'`,
	}, {
		name:    "absolute subPath is refused",
		mounts:  []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "/etc"}},
		wantErr: `subPath "/etc" must not be an absolute path`,
	}, {
		name:   "subPath through a link leaving the volume is refused",
		mounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "escape/x"}},
		setup: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			link := filepath.Join(e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch"), "escape")
			if err := os.Symlink(hostDir, link); err != nil {
				t.Fatal(err)
			}
		},
		wantErr: `subPath "escape/x" resolves outside the volume`,
	}, {
		name:    "unknown volume",
		mounts:  []v1.VolumeMount{{Name: "nope", MountPath: "/x"}},
		wantErr: `cannot find volume "nope" to mount into container "c"`,
	}, {
		name:    "invalid propagation",
		mounts:  []v1.VolumeMount{{Name: "scratch", MountPath: "/x", MountPropagation: &bogus}},
		wantErr: `invalid mountPropagation "Sideways"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			e.f.setConfigMap("app", map[string]string{"app.conf": "x"})
			pod := testPod(
				v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}},
				configMapVolume("cfg", "app", nil, nil, nil),
			)
			pod.Spec.Containers[0].VolumeMounts = tt.mounts
			if err := e.m.SetUp(context.Background(), pod); err != nil {
				t.Fatalf("SetUp: %v", err)
			}
			if tt.setup != nil {
				tt.setup(t, e, pod)
			}
			t.Cleanup(func() {
				if err := tearDownSubPaths(e.m.PodDir(pod.UID)); err != nil {
					t.Errorf("tearing down subPath mounts: %v", err)
				}
			})
			got, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Mounts error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Mounts: %v", err)
			}
			want := tt.want(e, pod)
			if len(got) != len(want)+1 {
				t.Fatalf("Mounts = %v, want %d volume mounts and the termination log", got, len(want))
			}
			for i := range want {
				if got[i].String() != want[i].String() {
					t.Errorf("mount %d = %v, want %v", i, got[i], want[i])
				}
			}
			if tt.check != nil {
				tt.check(t, e, pod)
			}
		})
	}
}

// subPathTarget is where the index-th volumeMount of container "c" is
// bind-mounted.
func subPathTarget(e *testEnv, pod *v1.Pod, volume string, index int) string {
	return filepath.Join(e.m.PodDir(pod.UID), subPathsDirName, volume, "c", strconv.Itoa(index))
}

func TestMountsTerminationMessage(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(v1.Volume{Name: "logs", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	c := &pod.Spec.Containers[0]

	mounts, err := e.m.Mounts(pod, c, 3)
	if err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	path := e.m.TerminationMessagePath(pod, "c", 3)
	if want := filepath.Join(e.root, "pods", "uid-1", "containers", "c", "3"); path != want {
		t.Errorf("TerminationMessagePath = %q, want %q", path, want)
	}
	assertMode(t, path, 0o666)
	last := mounts[len(mounts)-1]
	if last.ContainerPath != "/dev/termination-log" || last.HostPath != path || last.Readonly {
		t.Errorf("termination mount = %v, want %s at /dev/termination-log", last, path)
	}

	// A custom path is honoured, and a new start gets an empty new file.
	if err := os.WriteFile(path, []byte("died"), 0o666); err != nil {
		t.Fatal(err)
	}
	c.TerminationMessagePath = "/tmp/msg"
	mounts, err = e.m.Mounts(pod, c, 4)
	if err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	if last := mounts[len(mounts)-1]; last.ContainerPath != "/tmp/msg" || last.HostPath != e.m.TerminationMessagePath(pod, "c", 4) {
		t.Errorf("termination mount = %v", last)
	}
	if got := readFile(t, path); got != "died" {
		t.Errorf("the previous start's message was changed to %q", got)
	}

	// A volumeMount at that path wins.
	c.VolumeMounts = []v1.VolumeMount{{Name: "logs", MountPath: "/tmp/msg"}}
	mounts, err = e.m.Mounts(pod, c, 5)
	if err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	if len(mounts) != 1 || mounts[0].HostPath != e.m.volumeDir(pod.UID, emptyDirPlugin, "logs") {
		t.Errorf("Mounts = %v, want only the volume", mounts)
	}
}

func TestEtcHosts(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1\tlocalhost\n10.0.0.1\tnode1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aliases := []v1.HostAlias{{IP: "10.1.1.1", Hostnames: []string{"db", "db.local"}}}
	tests := []struct {
		name    string
		pod     func(*v1.Pod)
		ips     []string
		want    string // "" for no file
		noMount bool
	}{{
		name: "pod network with hostname",
		ips:  []string{"10.244.0.5", "fd00::5"},
		want: managedHostsHeader + "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
			"10.244.0.5\tweb\nfd00::5\tweb\n",
	}, {
		name: "subdomain and host aliases",
		pod: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostAliases = "web-0", "web", aliases
		},
		ips: []string{"10.244.0.5"},
		want: managedHostsHeader + "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
			"10.244.0.5\tweb-0.web.ns.svc.cluster.local\tweb-0\n" +
			"\n# Entries added by HostAliases.\n10.1.1.1\tdb\tdb.local\n",
	}, {
		name: "host network copies the node's file",
		pod:  func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.HostAliases = true, aliases },
		want: managedHostNetworkHostsHeader + "127.0.0.1\tlocalhost\n10.0.0.1\tnode1\n" +
			"\n# Entries added by HostAliases.\n10.1.1.1\tdb\tdb.local\n",
	}, {
		name:    "no IP yet: no file, no mount",
		noMount: true,
	}, {
		name: "a volumeMount at /etc/hosts wins",
		pod: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: nodeHosts}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}}
		},
		ips:     []string{"10.244.0.5"},
		noMount: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, WithClusterDomain("cluster.local"), WithNodeHostsFile(nodeHosts))
			pod := testPod()
			if tt.pod != nil {
				tt.pod(pod)
			}
			if err := e.m.WriteEtcHosts(pod, tt.ips); err != nil {
				t.Fatalf("WriteEtcHosts: %v", err)
			}
			file := filepath.Join(e.m.PodDir(pod.UID), "etc-hosts")
			if tt.want != "" {
				if got := readFile(t, file); got != tt.want {
					t.Errorf("etc-hosts =\n%s\nwant\n%s", got, tt.want)
				}
				assertMode(t, file, 0o644)
			}
			mounts, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0)
			if err != nil {
				t.Fatalf("Mounts: %v", err)
			}
			var hosts []*runtimeapi.Mount
			for _, m := range mounts {
				if m.ContainerPath == "/etc/hosts" && m.HostPath == file {
					hosts = append(hosts, m)
				}
			}
			if tt.noMount != (len(hosts) == 0) || len(hosts) > 1 {
				t.Errorf("managed /etc/hosts mounts = %v, want mounted: %v", hosts, !tt.noMount)
			}
		})
	}
}
