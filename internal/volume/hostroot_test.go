package volume

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestHostRootVolumeSource(t *testing.T) {
	const podVolume = "/var/lib/nodelet/pods/uid/volumes/kubernetes.io~empty-dir/cache"
	for _, tt := range []struct {
		name      string
		hostRoot  string
		vp        PodVolume
		wantLocal string
	}{
		{name: "hostPath on the host", hostRoot: "/", vp: PodVolume{Kind: KindHostPath, Path: "/data"}, wantLocal: "/data"},
		{name: "hostPath, hostRoot unset", hostRoot: "", vp: PodVolume{Kind: KindHostPath, Path: "/data"}, wantLocal: "/data"},
		{name: "hostPath in a container", hostRoot: "/host", vp: PodVolume{Kind: KindHostPath, Path: "/data"}, wantLocal: "/host/data"},
		{name: "hostPath with dots stays below hostRoot", hostRoot: "/host", vp: PodVolume{Kind: KindHostPath, Path: "/../etc"}, wantLocal: "/host/etc"},
		{name: "hostRoot with a trailing slash", hostRoot: "/host/", vp: PodVolume{Kind: KindHostPath, Path: "/var/run/x"}, wantLocal: "/host/var/run/x"},
		// nodelet's own directories are at the same path for it and the host.
		{name: "emptyDir in a container", hostRoot: "/host", vp: PodVolume{Kind: KindEmptyDir, Path: podVolume}, wantLocal: podVolume},
		{name: "local PV's mount in a container", hostRoot: "/host", vp: PodVolume{Kind: KindLocal, Path: podVolume}, wantLocal: podVolume},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := newHostRoot(tt.hostRoot)
			if err != nil {
				t.Fatal(err)
			}
			local, _ := r.volumeSource(tt.vp)
			if local != tt.wantLocal {
				t.Errorf("volumeSource(%+v) under %q = %s, want %s", tt.vp, tt.hostRoot, local, tt.wantLocal)
			}
		})
	}
}

// fakeHost makes a host's tree under a temporary hostRoot, below a top
// directory /<top> of a name of its own (so that code which missed
// hostRoot fails on paths the machine does not have, and what it left on
// the machine is removed): links in it mean something only on the host's
// terms. /<top>/etc/conf is an absolute link to /<top>/etc/real,
// /<top>/escape a relative one that climbs past the root, and /<top>/data
// holds a file, a directory, an absolute link into itself and one out of
// it. at(p) is the host's path /<top>/p.
func fakeHost(t *testing.T) (h string, at func(string) string) {
	t.Helper()
	h = t.TempDir()
	top := "nodelet-hostroot-" + filepath.Base(filepath.Dir(h))
	at = func(p string) string { return "/" + top + p }
	if _, err := os.Lstat(at("")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the machine has %s: %v", at(""), err)
	}
	t.Cleanup(func() {
		if _, err := os.Lstat(at("")); err == nil {
			t.Errorf("%s was made outside hostRoot", at(""))
			_ = os.RemoveAll(at(""))
		}
	})
	for _, d := range []string{"etc/real", "data/sub", "srv"} {
		if err := os.MkdirAll(filepath.Join(h, at("/"+d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"etc/real/marker": "real", "data/file": "from the host", "data/sub/inner": "inner", "srv/secret": "secret"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(h, at("/"+name)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"etc/conf":     at("/etc/real"),
		"escape":       "../../../../../..",
		"data/to-sub":  at("/data/sub"),
		"data/to-srv":  at("/srv"),
		"file-link":    at("/data/file"),
		"dangling-dir": at("/made/by/link"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(h, at("/"+name))); err != nil {
			t.Fatal(err)
		}
	}
	return h, at
}

func TestCheckHostPathUnderHostRoot(t *testing.T) {
	for _, tt := range []struct {
		name    string
		path    string
		typ     v1.HostPathType
		wantErr string
		// created is a path under hostRoot that the type creates, with its mode.
		created     string
		createdMode fs.FileMode
	}{
		{name: "Directory through an absolute link", path: "/etc/conf", typ: v1.HostPathDirectory},
		{name: "File through an absolute link", path: "/file-link", typ: v1.HostPathFile},
		{name: "File in a directory reached through a link", path: "/etc/conf/marker", typ: v1.HostPathFile},
		{name: "dot-dot stops at the root", path: "/escape/TOP/etc/real", typ: v1.HostPathDirectory},
		{name: "Directory missing", path: "/absent", typ: v1.HostPathDirectory, wantErr: "hostPath type check failed: TOP/absent does not exist (type Directory)"},
		{name: "Directory is a file", path: "/data/file", typ: v1.HostPathDirectory, wantErr: "hostPath type check failed: TOP/data/file is not a directory"},
		{name: "File is a directory", path: "/etc/conf", typ: v1.HostPathFile, wantErr: "is not a file"},
		{name: "Socket is a file", path: "/data/file", typ: v1.HostPathSocket, wantErr: "is not a socket"},
		{name: "CharDevice is a directory", path: "/data", typ: v1.HostPathCharDev, wantErr: "is not a character device"},
		{name: "BlockDevice is a file", path: "/data/file", typ: v1.HostPathBlockDev, wantErr: "is not a block device"},
		{name: "DirectoryOrCreate makes it under hostRoot", path: "/new/dir", typ: v1.HostPathDirectoryOrCreate, created: "new/dir", createdMode: fs.ModeDir | 0o755},
		{name: "DirectoryOrCreate below a link", path: "/etc/conf/made", typ: v1.HostPathDirectoryOrCreate, created: "etc/real/made", createdMode: fs.ModeDir | 0o755},
		// As os.MkdirAll on the host: a dangling link is not a directory.
		{name: "DirectoryOrCreate below a dangling link", path: "/dangling-dir/x", typ: v1.HostPathDirectoryOrCreate, wantErr: "creating hostPath TOP/dangling-dir/x"},
		{name: "DirectoryOrCreate refuses a file", path: "/file-link", typ: v1.HostPathDirectoryOrCreate, wantErr: "is not a directory"},
		{name: "FileOrCreate makes it under hostRoot", path: "/etc/conf/new.conf", typ: v1.HostPathFileOrCreate, created: "etc/real/new.conf", createdMode: 0o644},
		{name: "FileOrCreate makes its directories", path: "/deep/er/f", typ: v1.HostPathFileOrCreate, created: "deep/er/f", createdMode: 0o644},
		{name: "FileOrCreate accepts the file a link names", path: "/file-link", typ: v1.HostPathFileOrCreate},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, at := fakeHost(t)
			root, err := newHostRoot(h)
			if err != nil {
				t.Fatal(err)
			}
			path := at(strings.ReplaceAll(tt.path, "TOP", strings.TrimPrefix(at(""), "/")))
			err = checkHostPath(root, &v1.HostPathVolumeSource{Path: path, Type: &tt.typ})
			if tt.wantErr != "" {
				if want := strings.ReplaceAll(tt.wantErr, "TOP", at("")); err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("checkHostPath error = %v, want it to contain %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("checkHostPath: %v", err)
			}
			if tt.created == "" {
				return
			}
			info, err := os.Lstat(filepath.Join(h, at("/"+tt.created)))
			if err != nil {
				t.Fatalf("not created under hostRoot: %v", err)
			}
			if info.Mode() != tt.createdMode {
				t.Errorf("mode of %s = %v, want %v", tt.created, info.Mode(), tt.createdMode)
			}
		})
	}
}

// TestMountsOfHostPathUnderHostRoot: the runtime is handed the host's
// path of a hostPath volume, and the bind mount nodelet makes of a subPath
// of it, whose source nodelet opens under hostRoot with the host's links.
func TestMountsOfHostPathUnderHostRoot(t *testing.T) {
	requireRoot(t)
	h, at := fakeHost(t)
	e := newTestEnv(t, WithHostRoot(h))
	dirType := v1.HostPathDirectory
	pod := testPod(v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: at("/data"), Type: &dirType}}})
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	t.Cleanup(func() {
		if err := tearDownSubPaths(e.m.PodDir(pod.UID)); err != nil {
			t.Errorf("tearDownSubPaths: %v", err)
		}
	})
	for _, tt := range []struct {
		name     string
		subPath  string
		wantHost string // the runtime's path; "" is the subPath's mount target
		wantFile string // a file at the runtime's path
		wantData string
		wantErr  string
	}{
		{name: "the whole volume", wantHost: at("/data")},
		{name: "a file", subPath: "file", wantData: "from the host"},
		{name: "a directory", subPath: "sub", wantFile: "inner", wantData: "inner"},
		{name: "an absolute link inside the volume, on the host's terms", subPath: "to-sub", wantFile: "inner", wantData: "inner"},
		{name: "an absolute link out of the volume", subPath: "to-srv", wantErr: `subPath "to-srv" resolves outside the volume`},
		{name: "a missing directory is created in the volume", subPath: "sub/made", wantFile: "", wantData: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &pod.Spec.Containers[0]
			c.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/mnt", SubPath: tt.subPath}}
			mounts, err := e.m.Mounts(pod, c, 0, nil, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Mounts error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Mounts: %v", err)
			}
			want := tt.wantHost
			if want == "" {
				want = subPathTarget(e, pod, "host", 0)
			}
			if mounts[0].HostPath != want {
				t.Fatalf("runtime's path = %s, want %s", mounts[0].HostPath, want)
			}
			if tt.subPath == "" {
				return
			}
			if tt.subPath == "sub/made" {
				if info, err := os.Stat(filepath.Join(h, at("/data/sub/made"))); err != nil || !info.IsDir() {
					t.Errorf("the missing subPath was not made under hostRoot: %v", err)
				}
				return
			}
			if got := readFile(t, filepath.Join(want, tt.wantFile)); got != tt.wantData {
				t.Errorf("the runtime's path reads %q, want %q", got, tt.wantData)
			}
		})
	}
}

func TestLocalPersistentVolumeUnderHostRoot(t *testing.T) {
	h, at := fakeHost(t)
	e := newTestEnv(t, WithHostRoot(h))
	pod := testPod(claimVolume("data", "claim", false))
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	// On the host /etc/conf is a link to /etc/real.
	claim, pv := boundPair("claim", "pv-1", localPV(at("/etc/conf")))
	e.f.setClaim(claim)
	e.f.setPV(pv)
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	dir := filepath.Join(e.m.PodDir(pod.UID), "volumes", "kubernetes.io~local-volume", "pv-1")
	mps, _ := e.mounter.List()
	if want := filepath.Join(h, at("/etc/real")); len(mps) != 1 || mps[0].Device != want || mps[0].Path != dir {
		t.Fatalf("mounts = %+v, want %s on %s", mps, want, dir)
	}

	missing, missingPV := boundPair("other", "pv-2", localPV(at("/data/file")))
	e.f.setClaim(missing)
	e.f.setPV(missingPV)
	other := testPod(claimVolume("data", "other", false))
	other.UID = "other-uid"
	err := e.m.SetUp(context.Background(), other)
	if err == nil || !strings.Contains(err.Error(), at("/data/file")+" is not a directory") {
		t.Errorf("SetUp of a local PV that is a file on the host = %v, want not a directory", err)
	}
}
