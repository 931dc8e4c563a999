package gc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/cri"
)

// fakeImages is the part of cri.Runtime image GC uses.
type fakeImages struct {
	cri.Runtime
	images  []*runtimeapi.Image
	inUse   map[string]bool
	removed []string
	fsErr   error
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f.images, nil
}

func (f *fakeImages) ImagesInUse(context.Context) (map[string]bool, error) { return f.inUse, nil }

func (f *fakeImages) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	f.removed = append(f.removed, spec.GetImage())
	f.images = slices.DeleteFunc(f.images, func(i *runtimeapi.Image) bool { return i.GetId() == spec.GetImage() })
	return nil
}

func (f *fakeImages) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	if f.fsErr != nil {
		return nil, f.fsErr
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{
		{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/images"}},
	}}, nil
}

func (f *fakeImages) SandboxImage(context.Context) (string, error) { return "pause:1", nil }

func TestImageGC(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	rt := &fakeImages{
		images: []*runtimeapi.Image{
			{Id: "old", Size: 30},
			{Id: "newer", Size: 30},
			{Id: "used", RepoTags: []string{"used:1"}, Size: 30},
			{Id: "pause", RepoTags: []string{"pause:1"}, Size: 30},
		},
		inUse: map[string]bool{"used:1": true},
	}
	rec := record.NewFakeRecorder(10)
	available := int64(10)
	g := &ImageGC{
		Runtime:  rt,
		Policy:   ImagePolicy{HighThresholdPercent: 80, LowThresholdPercent: 50, MinAge: time.Minute, MaxAge: time.Hour},
		Period:   time.Minute,
		Recorder: rec,
		Node:     &corev1.ObjectReference{Kind: "Node", Name: "n"},
		Clock:    clk,
		Stat:     func(string) (int64, int64, error) { return 100, available, nil },
		Log:      logr.Discard(),
	}
	ctx := context.Background()
	event := func() string {
		select {
		case e := <-rec.Events:
			return e
		default:
			return ""
		}
	}

	// Over the high threshold with nothing old enough: the event, an error.
	err := g.GarbageCollect(ctx)
	if err == nil || len(rt.removed) > 0 {
		t.Fatalf("first run: err %v, removed %v; want an error, nothing removed", err, rt.removed)
	}
	if e := event(); !strings.HasPrefix(e, "Warning FreeDiskSpaceFailed Failed to garbage collect required amount of images. Attempted to free 40 bytes, but only found 0 bytes eligible to free.") {
		t.Fatalf("event %q, want FreeDiskSpaceFailed", e)
	}

	// "newer" is used a while later, then both are old enough: the least
	// recently used goes first, enough for 40 bytes is two images of 30,
	// but only two are eligible.
	clk.Step(30 * time.Second)
	rt.inUse = map[string]bool{"used:1": true, "newer": true}
	g.mu.Lock()
	_, _ = g.detect(ctx)
	g.mu.Unlock()
	rt.inUse = map[string]bool{"used:1": true}
	clk.Step(time.Minute)
	available = 10
	if err := g.GarbageCollect(ctx); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if want := []string{"old", "newer"}; !slices.Equal(rt.removed, want) {
		t.Fatalf("removed %v, want %v (least recently used first, never used or sandbox image)", rt.removed, want)
	}

	// The maximum age removes an unused image whatever the usage.
	rt.removed = nil
	rt.images = append(rt.images, &runtimeapi.Image{Id: "stale", Size: 1})
	available = 90
	_ = g.GarbageCollect(ctx)
	clk.Step(2 * time.Hour)
	if err := g.GarbageCollect(ctx); err != nil {
		t.Fatalf("age run: %v", err)
	}
	if want := []string{"stale"}; !slices.Equal(rt.removed, want) {
		t.Fatalf("removed %v, want %v by age", rt.removed, want)
	}

	// Failing twice in a row gives ImageGCFailed, once does not.
	rt.fsErr = errors.New("no filesystem")
	g.collect(ctx)
	if e := event(); e != "" {
		t.Fatalf("event after one failure %q, want none", e)
	}
	g.collect(ctx)
	if e := event(); !strings.HasPrefix(e, "Warning ImageGCFailed reading the image filesystem: no filesystem") {
		t.Fatalf("event after two failures %q, want ImageGCFailed", e)
	}

	// DeleteUnusedImages removes every unused image old enough.
	rt.fsErr = nil
	rt.removed = nil
	rt.images = append(rt.images, &runtimeapi.Image{Id: "fresh", Size: 5}, &runtimeapi.Image{Id: "other", Size: 7})
	_, _ = g.DeleteUnusedImages(ctx)
	clk.Step(2 * time.Minute)
	rt.images = append(rt.images, &runtimeapi.Image{Id: "young", Size: 100})
	freed, err := g.DeleteUnusedImages(ctx)
	if err != nil || freed != 12 || !slices.Equal(rt.removed, []string{"fresh", "other"}) {
		t.Fatalf("DeleteUnusedImages = %d, %v, removed %v; want 12 bytes of fresh and other", freed, err, rt.removed)
	}
}

// The images of pods' image volumes are in use, by the reference the pod
// names them with or as the runtime spells it.
func TestImageGCKeepsTheImagesOfImageVolumes(t *testing.T) {
	rt := &fakeImages{
		images: []*runtimeapi.Image{
			{Id: "data", RepoTags: []string{"docker.io/library/data:1"}, Size: 30},
			{Id: "models", RepoTags: []string{"registry.example/models:2"}, Size: 30},
			{Id: "unused", RepoTags: []string{"docker.io/library/unused:1"}, Size: 30},
		},
		inUse: map[string]bool{},
	}
	g := &ImageGC{
		Runtime:      rt,
		Policy:       ImagePolicy{HighThresholdPercent: 80, LowThresholdPercent: 50},
		Period:       time.Minute,
		Recorder:     record.NewFakeRecorder(10),
		Node:         &corev1.ObjectReference{Kind: "Node", Name: "n"},
		Clock:        clocktesting.NewFakeClock(t0),
		Stat:         func(string) (int64, int64, error) { return 100, 90, nil },
		Log:          logr.Discard(),
		VolumeImages: func(context.Context) ([]string, error) { return []string{"data:1", "registry.example/models:2"}, nil },
	}
	if _, err := g.DeleteUnusedImages(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"unused"}; !slices.Equal(rt.removed, want) {
		t.Fatalf("removed %v, want %v: image volumes' images are in use", rt.removed, want)
	}
}

// The image pull records follow the images through Listed and Removed.
func TestImageGCTellsListingsAndRemovals(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	rt := &fakeImages{images: []*runtimeapi.Image{{Id: "old", Size: 30}, {Id: "kept", Size: 30}}, inUse: map[string]bool{"kept": true}}
	var listings [][]string
	var listedAt []time.Time
	var removed []string
	g := &ImageGC{
		Runtime: rt,
		Policy:  ImagePolicy{HighThresholdPercent: 100, MaxAge: time.Hour},
		Period:  time.Minute,
		Clock:   clk,
		Log:     logr.Discard(),
		Listed: func(listed []*runtimeapi.Image, at time.Time) {
			var ids []string
			for _, img := range listed {
				ids = append(ids, img.GetId())
			}
			listings = append(listings, ids)
			listedAt = append(listedAt, at)
		},
		Removed: func(id string) { removed = append(removed, id) },
	}
	if err := g.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Hour)
	if err := g.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"old", "kept"}, {"old", "kept"}}; !slices.EqualFunc(listings, want, slices.Equal[[]string]) {
		t.Errorf("listings %v, want %v", listings, want)
	}
	if !listedAt[1].Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("second listing at %v, want the clock's time before listing", listedAt[1])
	}
	if want := []string{"old"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
}
