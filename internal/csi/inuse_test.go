package csi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestUniqueVolumeName(t *testing.T) {
	if got, want := UniqueVolumeName("hostpath.csi.k8s.io", "vol-1"), v1.UniqueVolumeName("kubernetes.io/csi/hostpath.csi.k8s.io^vol-1"); got != want {
		t.Errorf("UniqueVolumeName = %q, want %q", got, want)
	}
}

// A volume that needs attaching is staged only once the Node's status
// lists it in use; it stays listed while its records are on disk, and
// leaves the list with its teardown.
func TestPublishWaitsUntilReportedInUse(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	kicks := make(chan struct{}, 10)
	e.inUse = NewInUse(e.root, func() { kicks <- struct{}{} })
	e.attach("vol-1", nil)
	p := e.publisher()
	name := UniqueVolumeName(testDriver, "vol-1")

	done := make(chan error, 1)
	go func() {
		_, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1"))
		done <- err
	}()
	select {
	case <-kicks:
	case <-time.After(5 * time.Second):
		t.Fatal("no Node status write asked for when the volume became in use")
	}
	list := func() []v1.UniqueVolumeName {
		t.Helper()
		l, err := e.inUse.List()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if diff := cmp.Diff([]v1.UniqueVolumeName{name}, list()); diff != "" {
		t.Errorf("in use while publishing (-want +got):\n%s", diff)
	}
	e.inUse.MarkReported(nil)
	select {
	case err := <-done:
		t.Fatalf("Publish returned (%v) before the Node's status listed the volume", err)
	case <-time.After(100 * time.Millisecond):
	}
	if n := e.driver.count("stage"); n != 0 {
		t.Fatalf("staged %d times before the volume was reported in use", n)
	}
	e.inUse.MarkReported([]v1.UniqueVolumeName{name})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Publish still waiting after the volume was reported in use")
	}
	if diff := cmp.Diff([]v1.UniqueVolumeName{name}, list()); diff != "" {
		t.Errorf("in use once published (-want +got):\n%s", diff)
	}
	// A new tracker (a restart) finds it on disk.
	if l, _ := NewInUse(e.root, nil).List(); len(l) != 1 || l[0] != name {
		t.Errorf("in use after a restart = %v, want %v", l, name)
	}
	for len(kicks) > 0 {
		<-kicks
	}
	if err := p.UnpublishPod(context.Background(), testPod("web").UID); err != nil {
		t.Fatal(err)
	}
	if l := list(); len(l) != 0 {
		t.Errorf("in use after the teardown = %v, want none", l)
	}
	if len(kicks) == 0 {
		t.Error("no Node status write asked for when the volume left use")
	}
}

// A timed-out wait for the report fails the Publish before anything is
// staged; the caller retries.
func TestPublishReportTimeout(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e.inUse = NewInUse(e.root, nil)
	e.attach("vol-1", nil)
	p := e.publisher()
	p.attachTimeout = 50 * time.Millisecond
	_, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1"))
	if err == nil {
		t.Fatal("Publish succeeded without the volume reported in use")
	}
	if n := e.driver.count("stage") + e.driver.count("publish"); n != 0 {
		t.Errorf("%d driver calls, want none", n)
	}
}

// Volumes of a driver that needs no attaching are not reported in use, and
// wait for nothing.
func TestNoAttachDriverNotInUse(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e.inUse = NewInUse(e.root, nil)
	e.csiDrivers[testDriver] = &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: testDriver},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)},
	}
	p := e.publisher()
	if _, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1")); err != nil {
		t.Fatal(err)
	}
	if l, err := e.inUse.List(); err != nil || len(l) != 0 {
		t.Errorf("in use = %v (%v), want none for a driver that needs no attaching", l, err)
	}
}

// TestDriverChangedTakesVolumesOutOfUse: a CSIDriver recreated without
// attachRequired takes a published volume out of volumesInUse and asks for
// a status write; a missing CSIDriver means attaching, as at publish.
func TestDriverChangedTakesVolumesOutOfUse(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	kicks := 0
	e.inUse = NewInUse(e.root, func() { kicks++ })
	e.attach("vol-1", nil)
	e.inUse.MarkReported([]v1.UniqueVolumeName{UniqueVolumeName(testDriver, "vol-1")})
	if _, err := e.publisher().Publish(context.Background(), testPod("web"), pvVolume("vol-1")); err != nil {
		t.Fatal(err)
	}
	want := []v1.UniqueVolumeName{UniqueVolumeName(testDriver, "vol-1")}
	for i, step := range []struct {
		driver    *storagev1.CSIDriver
		wantInUse []v1.UniqueVolumeName
		wantKicks int
	}{
		{driver: nil, wantInUse: want},
		{driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}, wantInUse: []v1.UniqueVolumeName{}, wantKicks: 1},
		{driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}, wantInUse: []v1.UniqueVolumeName{}},
		{driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}}, wantInUse: want, wantKicks: 1},
	} {
		kicks = 0
		e.inUse.DriverChanged(testDriver, step.driver)
		got, err := e.inUse.List()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, step.wantInUse) {
			t.Errorf("step %d: in use %v, want %v", i, got, step.wantInUse)
		}
		if kicks != step.wantKicks {
			t.Errorf("step %d: %d status writes asked for, want %d", i, kicks, step.wantKicks)
		}
	}
}

// recordedVolumes reads every CSI record under root: every pod's publish
// records and the stagings'.
func recordedVolumes(root string) ([]volData, error) {
	paths, err := podRecords(root)
	if err != nil {
		return nil, err
	}
	return readRecords(root, paths)
}

// The records on disk are found where publishing and staging write them,
// whatever else the pods' directories hold.
func TestRecordedVolumes(t *testing.T) {
	root := t.TempDir()
	write := func(dir, handle string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := writeVolData(dir, volData{DriverName: testDriver, VolumeHandle: handle}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := recordedVolumes(root); err != nil || len(got) != 0 {
		t.Fatalf("an empty root: %v, %v", got, err)
	}
	csiDir := func(pod string) string {
		return filepath.Join(root, podsDirName, pod, podVolumesDirName, podPluginDirName)
	}
	write(filepath.Join(csiDir("uid-1"), "pv-1"), "vol-1")
	write(filepath.Join(csiDir("uid-2"), "pv-2"), "vol-2")
	write(filepath.Join(driversDir(root), testDriver, "staged"), "vol-3")
	// A pod without CSI volumes, a volume directory without its record
	// (published halfway), a stray file.
	for _, dir := range []string{filepath.Join(root, podsDirName, "uid-3", podVolumesDirName), filepath.Join(csiDir("uid-2"), "pv-4")} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(root, podsDirName, "stray"), filepath.Join(csiDir("uid-1"), "stray")} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := recordedVolumes(root)
	if err != nil {
		t.Fatal(err)
	}
	var handles []string
	for _, d := range got {
		handles = append(handles, d.VolumeHandle)
	}
	slices.Sort(handles)
	if diff := cmp.Diff([]string{"vol-1", "vol-2", "vol-3"}, handles); diff != "" {
		t.Errorf("recorded volumes (-want +got):\n%s", diff)
	}
}

// TestListReadsThePodsWithRecords: List reads every pod's directory at its
// first call and every listsPerScan-th; between, the records of the pods
// found then and of those a Publish noted, and sees those records go.
func TestListReadsThePodsWithRecords(t *testing.T) {
	// A driver that stages nothing: a pod's record is all there is of its
	// volume on disk.
	e := newEnv(t)
	root := e.root
	u := NewInUse(root, nil)
	e.inUse = u
	write := func(uid types.UID, handle string) {
		t.Helper()
		dir := publishDataDir(root, uid, "pv-"+handle)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := writeVolData(dir, volData{DriverName: testDriver, VolumeHandle: handle}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []string {
		t.Helper()
		l, err := u.List()
		if err != nil {
			t.Fatal(err)
		}
		var handles []string
		for _, n := range l {
			handles = append(handles, strings.TrimPrefix(string(n), csiPluginName+"/"+testDriver+"^"))
		}
		return handles
	}
	write("uid-1", "vol-1")
	if err := os.MkdirAll(filepath.Join(root, podsDirName, "uid-0", podVolumesDirName), 0o750); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"vol-1"}, list()); diff != "" {
		t.Fatalf("first list (-want +got):\n%s", diff)
	}
	// A record that no Publish noted waits for the next scan.
	write("uid-2", "vol-2")
	for i := 1; i < listsPerScan; i++ {
		if diff := cmp.Diff([]string{"vol-1"}, list()); diff != "" {
			t.Fatalf("list %d after an unnoted record (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff([]string{"vol-1", "vol-2"}, list()); diff != "" {
		t.Fatalf("the scan after an unnoted record (-want +got):\n%s", diff)
	}
	// A Publish's record is read at once, and a record removed leaves the
	// list.
	e.attach("vol-3", nil)
	u.MarkReported([]v1.UniqueVolumeName{UniqueVolumeName(testDriver, "vol-3")})
	if _, err := e.publisher().Publish(context.Background(), testPod("web"), pvVolume("vol-3")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, podsDirName, "uid-1")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"vol-2", "vol-3"}, list()); diff != "" {
		t.Errorf("after a Publish and a record removed (-want +got):\n%s", diff)
	}
}

func TestKeepScanned(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before map[types.UID]uint64
		found  []types.UID
		epoch  uint64
		want   map[types.UID]uint64
	}{
		{name: "the first scan", before: map[types.UID]uint64{}, found: []types.UID{"a"}, epoch: 1,
			want: map[types.UID]uint64{"a": 1}},
		{name: "a pod whose records went is dropped", before: map[types.UID]uint64{"a": 1, "b": 1}, found: []types.UID{"b"}, epoch: 2,
			want: map[types.UID]uint64{"b": 2}},
		{name: "a pod noted since the scan began is kept, found or not", before: map[types.UID]uint64{"a": 1, "n": 2, "m": 2},
			found: []types.UID{"m"}, epoch: 2, want: map[types.UID]uint64{"n": 2, "m": 2}},
		{name: "a pod noted before the scan began is kept only if found", before: map[types.UID]uint64{"n": 1, "m": 1},
			found: []types.UID{"m"}, epoch: 2, want: map[types.UID]uint64{"m": 2}},
		{name: "a later scan's note is kept by an earlier one", before: map[types.UID]uint64{"n": 3}, epoch: 2,
			want: map[types.UID]uint64{"n": 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keepScanned(tt.before, tt.found, tt.epoch)
			if diff := cmp.Diff(tt.want, tt.before); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
