package volume

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// TestOpenVolumeFileStaysInTheVolume: the env file of a fileKeyRef is read
// from the emptyDir the pod's containers write to, so what they put there
// (links out of it, FIFOs) must not make nodelet read the host's files or
// block.
func TestOpenVolumeFileStaysInTheVolume(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(v1.Volume{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}})
	if err := e.m.SetUp(context.Background(), &v1.Pod{ObjectMeta: pod.ObjectMeta, Spec: v1.PodSpec{Volumes: pod.Spec.Volumes[:1]}}); err != nil {
		t.Fatal(err)
	}
	dir := e.m.volumeDir(pod.UID, emptyDirPlugin, "shared")
	host := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(host, []byte("HOST='secret'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte("A='1'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(dir, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../../.."+host, filepath.Join(dir, "rel-link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	f, err := e.m.OpenVolumeFile(pod, "shared", "env")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "A='1'\n" {
		t.Fatalf("read %q", data)
	}
	for _, tc := range []struct{ volume, path, want string }{
		{"shared", "abs-link", "no such file"},
		{"shared", "rel-link", "no such file"},
		{"shared", "../../../../../../../.." + host, "no such file"},
		{"shared", "fifo", "not a regular file"},
		{"cfg", "env", "no emptyDir volume"},
		{"none", "env", "no emptyDir volume"},
	} {
		f, err := e.m.OpenVolumeFile(pod, tc.volume, tc.path)
		if err == nil {
			data, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("%s/%s opened (%q), want it refused", tc.volume, tc.path, data)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s/%s: %v, want %q", tc.volume, tc.path, err, tc.want)
		}
	}
}
