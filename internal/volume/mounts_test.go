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
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

func TestMounts(t *testing.T) {
	requireRoot(t)
	hostDir := t.TempDir()
	bidirectional := v1.MountPropagationBidirectional
	hostToContainer := v1.MountPropagationHostToContainer
	none := v1.MountPropagationNone
	bogus := v1.MountPropagationMode("Sideways")

	env := []criconfig.EnvVar{{Name: "POD_NAME", Value: "web-0"}, {Name: "DIR", Value: "logs"}, {Name: "KEY", Value: "app.conf"},
		{Name: "UP", Value: ".."}, {Name: "DEEP_UP", Value: "a/../../etc"}, {Name: "ABS", Value: "/tmp"},
		{Name: "LINK", Value: "escape"}, {Name: "EMPTY", Value: ""}}

	tests := []struct {
		name   string
		mounts []v1.VolumeMount
		setup  func(t *testing.T, e *testEnv, pod *v1.Pod)
		want   func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount // volume mounts only
		check  func(t *testing.T, e *testEnv, pod *v1.Pod)
		// wantErr is contained in the error; with exactErr it is the
		// error's whole text, as the kubelet shows it.
		wantErr  string
		exactErr bool
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
		name:     "subPath with .. is refused",
		mounts:   []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "a/../../../etc"}},
		wantErr:  "unable to provision SubPath `a/../../../etc`: must not contain '..'",
		exactErr: true,
	}, {
		name:     "absolute subPath is refused",
		mounts:   []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPath: "/etc"}},
		wantErr:  "error SubPath `/etc` must not be an absolute path",
		exactErr: true,
	}, {
		name: "subPathExpr expands with the environment and is created inside the volume",
		mounts: []v1.VolumeMount{
			{Name: "scratch", MountPath: "/data", SubPathExpr: "$(DIR)/$(POD_NAME)"},
			{Name: "scratch", MountPath: "/literal", SubPath: "$(POD_NAME)"},
		},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			return []*runtimeapi.Mount{
				{ContainerPath: "/data", HostPath: subPathTarget(e, pod, "scratch", 0)},
				{ContainerPath: "/literal", HostPath: subPathTarget(e, pod, "scratch", 1)},
			}
		},
		check: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			vol := e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch")
			if err := os.WriteFile(filepath.Join(vol, "logs", "web-0", "marker"), nil, 0o600); err != nil {
				t.Fatalf("the expanded subPath was not created: %v", err)
			}
			if _, err := os.Stat(filepath.Join(subPathTarget(e, pod, "scratch", 0), "marker")); err != nil {
				t.Errorf("the mount target does not show the expanded subPath: %v", err)
			}
			// A literal subPath is never expanded.
			if info, err := os.Stat(filepath.Join(vol, "$(POD_NAME)")); err != nil || !info.IsDir() {
				t.Errorf("literal subPath: %v, %v; want a directory named as written", info, err)
			}
		},
	}, {
		name:   "subPathExpr of a configMap key",
		mounts: []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/app.conf", SubPathExpr: "$(KEY)"}},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			return []*runtimeapi.Mount{{ContainerPath: "/etc/app.conf", HostPath: subPathTarget(e, pod, "cfg", 0), Readonly: true}}
		},
		check: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			if data, err := os.ReadFile(subPathTarget(e, pod, "cfg", 0)); err != nil || string(data) != "x" {
				t.Errorf("the mounted subPath reads %q, %v; want the key's value", data, err)
			}
		},
	}, {
		name:     "subPathExpr expanding to .. is refused",
		mounts:   []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPathExpr: "$(UP)"}},
		wantErr:  "unable to provision SubPath `..`: must not contain '..'",
		exactErr: true,
	}, {
		name:     "subPathExpr expanding to a path through .. is refused",
		mounts:   []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPathExpr: "x/$(DEEP_UP)"}},
		wantErr:  "unable to provision SubPath `x/a/../../etc`: must not contain '..'",
		exactErr: true,
	}, {
		name:     "subPathExpr expanding to an absolute path is refused",
		mounts:   []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPathExpr: "$(ABS)"}},
		wantErr:  "error SubPath `/tmp` must not be an absolute path",
		exactErr: true,
	}, {
		name:     "subPathExpr naming an unset or empty variable is refused",
		mounts:   []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPathExpr: "$(NOPE)/$(EMPTY)"}},
		wantErr:  "missing value for EMPTY, NOPE",
		exactErr: true,
	}, {
		name:   "subPathExpr through a link leaving the volume is refused",
		mounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPathExpr: "$(LINK)/x"}},
		setup: func(t *testing.T, e *testEnv, pod *v1.Pod) {
			link := filepath.Join(e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch"), "escape")
			if err := os.Symlink(hostDir, link); err != nil {
				t.Fatal(err)
			}
		},
		wantErr: `subPath "escape/x" resolves outside the volume`,
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
		name: "image volumes: always read-only, mounted by the runtime from the pulled reference, subPath handed over",
		mounts: []v1.VolumeMount{
			{Name: "img", MountPath: "/img"},
			{Name: "img", MountPath: "/img-logs", SubPathExpr: "$(DIR)", MountPropagation: &hostToContainer},
		},
		want: func(e *testEnv, pod *v1.Pod) []*runtimeapi.Mount {
			spec := &runtimeapi.ImageSpec{Image: "sha256:4f2e", UserSpecifiedImage: "registry.example/data:1"}
			return []*runtimeapi.Mount{
				{ContainerPath: "/img", Readonly: true, Image: spec},
				{ContainerPath: "/img-logs", Readonly: true, Image: spec, ImageSubPath: "logs", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
			}
		},
	}, {
		name:    "an image volume whose image was not pulled",
		mounts:  []v1.VolumeMount{{Name: "img-unpulled", MountPath: "/x"}},
		wantErr: `the image of volume "img-unpulled" has not been pulled`,
	}, {
		name:    "an image volume's subPath is checked like any other",
		mounts:  []v1.VolumeMount{{Name: "img", MountPath: "/x", SubPathExpr: "$(UP)"}},
		wantErr: "..",
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
				v1.Volume{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "registry.example/data:1"}}},
				v1.Volume{Name: "img-unpulled", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "registry.example/other:1"}}},
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
			got, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0, env, map[string]string{"img": "sha256:4f2e"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || tt.exactErr && err.Error() != tt.wantErr {
					t.Fatalf("Mounts error = %v, want %q (exact: %v)", err, tt.wantErr, tt.exactErr)
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

func TestContainerSubPath(t *testing.T) {
	env := []criconfig.EnvVar{{Name: "POD_NAME", Value: "web-0"}, {Name: "UP", Value: ".."}, {Name: "ABS", Value: "/tmp"},
		{Name: "DOTS", Value: "..data"}, {Name: "SLASHES", Value: "a//b/"}}
	tests := []struct {
		name    string
		vm      v1.VolumeMount
		want    string
		wantErr string
	}{
		{name: "whole volume", vm: v1.VolumeMount{}, want: ""},
		{name: "literal", vm: v1.VolumeMount{SubPath: "a/b"}, want: "a/b"},
		{name: "literal is not expanded", vm: v1.VolumeMount{SubPath: "$(POD_NAME)"}, want: "$(POD_NAME)"},
		{name: "expression", vm: v1.VolumeMount{SubPathExpr: "logs/$(POD_NAME)"}, want: "logs/web-0"},
		{name: "expression wins over a literal", vm: v1.VolumeMount{SubPath: "a", SubPathExpr: "$(POD_NAME)"}, want: "web-0"},
		{name: "escaped", vm: v1.VolumeMount{SubPathExpr: "$$(POD_NAME)"}, want: "$(POD_NAME)"},
		{name: "a name that only starts with dots", vm: v1.VolumeMount{SubPathExpr: "$(DOTS)"}, want: "..data"},
		{name: "repeated slashes are left to the resolution", vm: v1.VolumeMount{SubPathExpr: "$(SLASHES)"}, want: "a//b/"},
		{name: "expands to ..", vm: v1.VolumeMount{SubPathExpr: "$(UP)"}, wantErr: "unable to provision SubPath `..`: must not contain '..'"},
		{name: "expands to a path with ..", vm: v1.VolumeMount{SubPathExpr: "a/$(UP)/$(UP)/etc"},
			wantErr: "unable to provision SubPath `a/../../etc`: must not contain '..'"},
		{name: "expands to an absolute path", vm: v1.VolumeMount{SubPathExpr: "$(ABS)/x"}, wantErr: "error SubPath `/tmp/x` must not be an absolute path"},
		{name: "unset variable", vm: v1.VolumeMount{SubPathExpr: "$(POD)"}, wantErr: "missing value for POD"},
		{name: "literal with ..", vm: v1.VolumeMount{SubPath: "../x"}, wantErr: "unable to provision SubPath `../x`: must not contain '..'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := containerSubPath(&tt.vm, env)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("containerSubPath = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("containerSubPath = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestMountsSubPathExprPerStart: the expression is expanded at every start,
// so a start after the environment changed (an annotation read through the
// downward API) mounts the new directory at the same target.
func TestMountsSubPathExprPerStart(t *testing.T) {
	requireRoot(t)
	e := newTestEnv(t)
	pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/data", SubPathExpr: "$(ANNOTATION)/$(POD_NAME)"}}
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	t.Cleanup(func() {
		if err := tearDownSubPaths(e.m.PodDir(pod.UID)); err != nil {
			t.Errorf("tearing down subPath mounts: %v", err)
		}
	})
	vol := e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch")
	for restart, dir := range []string{"mypath", "mynewpath"} {
		env := []criconfig.EnvVar{{Name: "POD_NAME", Value: "foo"}, {Name: "ANNOTATION", Value: dir}}
		mounts, err := e.m.Mounts(pod, c, int32(restart), env, nil)
		if err != nil {
			t.Fatalf("start %d: Mounts: %v", restart, err)
		}
		if mounts[0].HostPath != subPathTarget(e, pod, "scratch", 0) {
			t.Fatalf("start %d: mount source %s, want the subPath target", restart, mounts[0].HostPath)
		}
		marker := dir + ".marker"
		if err := os.WriteFile(filepath.Join(vol, dir, "foo", marker), nil, 0o600); err != nil {
			t.Fatalf("start %d: the expanded subPath %s/foo was not created: %v", restart, dir, err)
		}
		if _, err := os.Stat(filepath.Join(mounts[0].HostPath, marker)); err != nil {
			t.Errorf("start %d: the target does not show %s/foo: %v", restart, dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(subPathTarget(e, pod, "scratch", 0), "mypath.marker")); err == nil {
		t.Error("the target still shows the first start's directory")
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
	// The set-up made the directory of the containers' files.
	assertMode(t, filepath.Join(e.root, "pods", "uid-1", "containers"), stateDirMode)

	mounts, err := e.m.Mounts(pod, c, 3, nil, nil)
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
	mounts, err = e.m.Mounts(pod, c, 4, nil, nil)
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
	mounts, err = e.m.Mounts(pod, c, 5, nil, nil)
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
		name: "hostnameOverride, without the subdomain's name",
		pod: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "web-0", "web", ptr.To("db-0.example.internal")
		},
		ips: []string{"10.244.0.5"},
		want: managedHostsHeader + "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
			"10.244.0.5\tdb-0.example.internal\n",
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
			mounts, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0, nil, nil)
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
