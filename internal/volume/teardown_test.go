package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/mount-utils"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/nomount"
)

func TestTearDown(t *testing.T) {
	e := newTestEnv(t)
	e.f.setSecret("creds", map[string]string{"user": "admin"})
	pod := testPod(
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		secretVolume("sec", "creds", nil, nil, nil),
		v1.Volume{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
	)
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	if _, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0, nil, nil); err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	if err := e.m.WriteEtcHosts(pod, []string{"10.0.0.2"}); err != nil {
		t.Fatalf("WriteEtcHosts: %v", err)
	}
	// Memory emptyDir, secret and projected volumes are on tmpfs.
	if mps, _ := e.mounter.List(); len(mps) != 3 {
		t.Fatalf("mounts after SetUp = %v, want 3 tmpfs", mps)
	}
	assertMode(t, e.m.PodDir(pod.UID), 0o750)
	if uids, err := e.m.ListPodDirs(); err != nil || !slices.Equal(uids, []types.UID{"uid-1"}) {
		t.Fatalf("ListPodDirs = %v, %v", uids, err)
	}

	for i := range 2 { // idempotent
		if err := e.m.TearDown(ctx, pod.UID); err != nil {
			t.Fatalf("TearDown #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(e.m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory still exists: %v", err)
	}
	if mps, _ := e.mounter.List(); len(mps) != 0 {
		t.Errorf("mounts after TearDown = %v", mps)
	}
	if uids, err := e.m.ListPodDirs(); err != nil || len(uids) != 0 {
		t.Errorf("ListPodDirs after TearDown = %v, %v", uids, err)
	}
	if _, ok := e.m.NextRefresh(pod.UID); ok {
		t.Error("tokens of a torn-down pod are still cached")
	}
}

// failingUnmounter refuses to unmount.
type failingUnmounter struct{ *mount.FakeMounter }

func (failingUnmounter) Unmount(string) error { return errors.New("device busy") }

func TestTearDownKeepsContentWhenUnmountFails(t *testing.T) {
	fake := mount.NewFakeMounter(nil)
	e := newTestEnv(t, WithMounter(failingUnmounter{fake}))
	pod := testPod(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	if err := e.m.TearDown(context.Background(), pod.UID); err == nil {
		t.Fatal("TearDown succeeded although the tmpfs could not be unmounted")
	}
	if _, err := os.Stat(e.m.volumeDir(pod.UID, emptyDirPlugin, "mem")); err != nil {
		t.Errorf("volume removed although still mounted: %v", err)
	}
}

// TestMemoryEmptyDirOnTmpfs mounts real tmpfs file systems; it needs the
// privilege to mount and is skipped without it.
func TestMemoryEmptyDirOnTmpfs(t *testing.T) {
	e := newTestEnv(t, WithMounter(mount.New("")))
	e.f.setSecret("creds", map[string]string{"password": "hunter2"})
	size := resource.MustParse("16Mi")
	pod := testPod(
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &size}}},
		secretVolume("sec", "creds", nil, nil, nil),
	)
	ctx := context.Background()
	setUpTmpfsOrSkip(t, e, pod)

	mem := e.m.volumeDir(pod.UID, emptyDirPlugin, "mem")
	assertTmpfs(t, mem, 16<<20)
	assertMode(t, mem, 0o777)
	assertTmpfs(t, e.m.volumeDir(pod.UID, secretPlugin, "sec"), 0)
	if got := readFile(t, filepath.Join(e.m.volumeDir(pod.UID, secretPlugin, "sec"), "password")); got != "hunter2" {
		t.Errorf("secret file = %q", got)
	}
	// A second SetUp does not stack another mount.
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("second SetUp: %v", err)
	}
	if n := mountsUnder(t, e.m.PodDir(pod.UID)); n != 2 {
		t.Errorf("%d mounts under the pod directory after two SetUps, want 2", n)
	}

	if err := e.m.TearDown(ctx, pod.UID); err != nil {
		t.Fatalf("TearDown: %v", err)
	}
	if n := mountsUnder(t, e.m.PodDir(pod.UID)); n != 0 {
		t.Errorf("%d mounts left under the pod directory", n)
	}
	if _, err := os.Stat(e.m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory still exists: %v", err)
	}
}

func assertTmpfs(t *testing.T, dir string, wantSize int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		t.Fatalf("%s is not on tmpfs (type %#x)", dir, st.Type)
	}
	if got := int64(st.Blocks) * st.Bsize; wantSize != 0 && got != wantSize {
		t.Errorf("size of %s = %d, want %d", dir, got, wantSize)
	}
}

func mountsUnder(t *testing.T, dir string) int {
	t.Helper()
	mps, err := mount.New("").List()
	if err != nil {
		t.Fatalf("listing mounts: %v", err)
	}
	n := 0
	for _, mp := range mps {
		if mount.PathWithinBase(mp.Path, dir) {
			n++
		}
	}
	return n
}

// TestTearDownNeverRemovesThroughAMountItDidNotList bind-mounts a host
// directory into a pod's emptyDir after the mounts were listed (here: a
// mounter that lists none, as a mount made since the listing): the
// removal stops at it and the host's files stay; once it is gone the
// next TearDown removes the pod's directory.
func TestTearDownNeverRemovesThroughAMountItDidNotList(t *testing.T) {
	e := newTestEnv(t, WithMounter(mount.NewFakeMounter(nil)))
	pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "data"), []byte("host data"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(e.m.volumeDir(pod.UID, emptyDirPlugin, "scratch"), "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(host, target, "", unix.MS_BIND, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("mounting is not permitted here: %v", err)
		}
		t.Fatal(err)
	}
	unmounted := false
	t.Cleanup(func() {
		if !unmounted {
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	})

	if err := e.m.TearDown(ctx, pod.UID); !errors.Is(err, nomount.ErrMountPoint) {
		t.Fatalf("TearDown = %v, want an error naming the mount point", err)
	}
	if got, err := os.ReadFile(filepath.Join(host, "data")); err != nil || string(got) != "host data" {
		t.Fatalf("host file after TearDown = %q, %v: removed through the mount", got, err)
	}
	if err := unix.Unmount(target, 0); err != nil {
		t.Fatal(err)
	}
	unmounted = true
	if err := e.m.TearDown(ctx, pod.UID); err != nil {
		t.Fatalf("TearDown once the mount is gone: %v", err)
	}
	if _, err := os.Stat(e.m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory still exists: %v", err)
	}
}

func TestMemoryVolumeSize(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	limited := func(limits ...string) *v1.Pod {
		pod := testPod()
		pod.Spec.Containers = nil
		for i, l := range limits {
			c := v1.Container{Name: fmt.Sprintf("c%d", i)}
			if l != "" {
				c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(l)}
			}
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		return pod
	}
	for _, tc := range []struct {
		name        string
		allocatable string // "" unknown
		pod         *v1.Pod
		sizeLimit   *resource.Quantity
		want        string // "" the host's default
	}{
		{"no limit anywhere: the node's allocatable", "4Gi", limited(""), nil, "4Gi"},
		{"the pod's limit, every container limited", "4Gi", limited("1Gi", "512Mi"), nil, "1536Mi"},
		{"one container unlimited: no pod limit", "4Gi", limited("1Gi", ""), nil, "4Gi"},
		{"a smaller sizeLimit", "4Gi", limited("1Gi"), q("64Mi"), "64Mi"},
		{"a sizeLimit past the pod's limit is not used", "4Gi", limited("1Gi"), q("2Gi"), "1Gi"},
		{"a pod limit past allocatable is not used", "1Gi", limited("2Gi"), nil, "1Gi"},
		{"allocatable unknown: the pod's limit", "", limited("256Mi"), nil, "256Mi"},
		{"allocatable unknown and no limits: the host's default", "", limited(""), nil, ""},
		{"a zero sizeLimit counts as none", "4Gi", limited(""), q("0"), "4Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{}
			if tc.allocatable != "" {
				m.nodeAllocatable = func() (v1.ResourceList, error) {
					return v1.ResourceList{v1.ResourceMemory: resource.MustParse(tc.allocatable)}, nil
				}
			}
			got := m.memoryVolumeSize(tc.pod, tc.sizeLimit)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("size %s, want the host's default", got)
			case tc.want != "" && (got == nil || got.Cmp(resource.MustParse(tc.want)) != 0):
				t.Fatalf("size %v, want %s", got, tc.want)
			}
		})
	}
}

// TestMemoryEmptyDirSizedByThePodLimit mounts a real tmpfs for a pod whose
// container is limited and whose volume has no sizeLimit: it is the pod's
// limit, not half the machine's memory.
func TestMemoryEmptyDirSizedByThePodLimit(t *testing.T) {
	e := newTestEnv(t, WithMounter(mount.New("")), WithNodeAllocatable(func() (v1.ResourceList, error) {
		return v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")}, nil
	}))
	pod := testPod(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("24Mi")}
	setUpTmpfsOrSkip(t, e, pod)
	assertTmpfs(t, e.m.volumeDir(pod.UID, emptyDirPlugin, "mem"), 24<<20)
}

// setUpTmpfsOrSkip sets up pod's volumes on real tmpfs file systems and
// tears them down at cleanup; without the privilege to mount it skips.
func setUpTmpfsOrSkip(t *testing.T, e *testEnv, pod *v1.Pod) {
	t.Helper()
	ctx := context.Background()
	err := e.m.SetUp(ctx, pod)
	if errors.Is(err, ErrMountNotPermitted) {
		t.Skipf("skipping: mounting tmpfs is not permitted here: %v", err)
	}
	if err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	t.Cleanup(func() { _ = e.m.TearDown(ctx, pod.UID) })
}

// TestTearDownReadsNoMountTableForVolumeMounts tears down pods with the
// system's mounter: a pod without mounts, and one whose memory-backed
// volume is a tmpfs, are removed without reading the mount table; a mount
// below a volume's root makes the teardown read it and unmount it. The
// tmpfs cases need the privilege to mount and are skipped without it.
func TestTearDownReadsNoMountTableForVolumeMounts(t *testing.T) {
	if !nomount.SeesBindMounts() || !statxSeesMountRoots() {
		t.Skip("the kernel has no openat2 or no STATX_ATTR_MOUNT_ROOT: every teardown reads the mount table")
	}
	e := &testEnv{f: newFakeFetcher(), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), root: t.TempDir()}
	e.f.clock = e.clock
	m, err := New(e.root, e.f, WithClock(e.clock))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if !m.removeFirst {
		t.Fatal("the system's mounter on this kernel tears down without the table")
	}
	e.m = m
	reads := 0
	list := m.mounts.list
	m.mounts.list = func() ([]mount.MountPoint, error) { reads++; return list() }
	ctx := context.Background()
	tearDown := func(t *testing.T, pod *v1.Pod, wantReads int) {
		t.Helper()
		reads = 0
		if err := m.TearDown(ctx, pod.UID); err != nil {
			t.Fatalf("TearDown: %v", err)
		}
		if reads != wantReads {
			t.Errorf("mount table read %d times, want %d", reads, wantReads)
		}
		if n := mountsUnder(t, m.PodDir(pod.UID)); n != 0 {
			t.Errorf("%d mounts left under the pod directory", n)
		}
		if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
			t.Errorf("pod directory still exists: %v", err)
		}
	}
	writeIn := func(t *testing.T, dir string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("no mounts", func(t *testing.T) {
		pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		if err := m.SetUp(ctx, pod); err != nil {
			t.Fatalf("SetUp: %v", err)
		}
		writeIn(t, m.volumeDir(pod.UID, emptyDirPlugin, "scratch"))
		tearDown(t, pod, 0)
	})
	t.Run("a tmpfs volume", func(t *testing.T) {
		pod := testPod(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
		pod.UID = "uid-2"
		setUpTmpfsOrSkip(t, e, pod)
		assertTmpfs(t, m.volumeDir(pod.UID, emptyDirPlugin, "mem"), 0)
		writeIn(t, m.volumeDir(pod.UID, emptyDirPlugin, "mem"))
		tearDown(t, pod, 0)
	})
	t.Run("a mount inside a volume", func(t *testing.T) {
		pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		pod.UID = "uid-3"
		if err := m.SetUp(ctx, pod); err != nil {
			t.Fatalf("SetUp: %v", err)
		}
		inner := filepath.Join(m.volumeDir(pod.UID, emptyDirPlugin, "scratch"), "mnt")
		if err := os.Mkdir(inner, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", inner, "tmpfs", 0, ""); err != nil {
			if errors.Is(err, unix.EPERM) {
				t.Skipf("mounting is not permitted here: %v", err)
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(inner, unix.MNT_DETACH) })
		writeIn(t, inner)
		tearDown(t, pod, 1)
	})
}
