package gc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/metrics"
)

// The Node events of image GC, the kubelet's reasons.
const (
	EventFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	EventImageGCFailed       = "ImageGCFailed"
)

// maxDetectPeriod bounds how long a container's use of an image may go
// unseen: images are detected at least this often, whatever the GC period.
const maxDetectPeriod = 30 * time.Second

// SandboxImageSource tells the image the runtime runs sandboxes with.
// cri.Client implements it.
type SandboxImageSource interface {
	SandboxImage(ctx context.Context) (string, error)
}

// FsStat returns the capacity and available bytes of the filesystem that
// holds path.
type FsStat func(path string) (capacity, available int64, err error)

// Statfs is FsStat with statfs(2).
func Statfs(path string) (capacity, available int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("reading the size of filesystem %s: %w", path, err)
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil //nolint:gosec // block counts fit
}

// ImageGC removes unused images, least recently used first, when the image
// filesystem is fuller than the high threshold, and images unused for
// longer than the maximum age; the kubelet's image GC. It is a manager
// runnable: Start runs it once and then every Period.
type ImageGC struct {
	Runtime cri.Runtime
	Policy  ImagePolicy
	Period  time.Duration
	// SandboxImage is the image sandboxes run with; when empty it is asked
	// of Runtime (SandboxImageSource) until it answers. A runtime that
	// names none (containerd 2) lists its sandbox image as pinned, which
	// image GC never removes either.
	SandboxImage string
	// Recorder and Node receive the Node events.
	Recorder record.EventRecorder
	Node     *corev1.ObjectReference
	Clock    clock.Clock
	Stat     FsStat
	Log      logr.Logger
	// VolumeImages lists the references of the image volumes of the
	// node's pods, which image GC keeps as in use (the runtime lists
	// only containers' own images); nil lists none.
	VolumeImages func(ctx context.Context) ([]string, error)
	// Listed, when set, is told each listing of the runtime's images and
	// when it began; Removed, each image (by ID) image GC removed. The
	// image pull records follow the images through them.
	Listed  func(listed []*runtimeapi.Image, at time.Time)
	Removed func(id string)

	mu         sync.Mutex
	records    map[string]*ImageRecord
	prevFailed bool
	// sandboxImageAsked is set once Runtime has answered SandboxImage.
	sandboxImageAsked bool
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (g *ImageGC) NeedLeaderElection() bool { return false }

// Start detects images at least every 30s, and collects once and then every
// Period, until ctx ends.
func (g *ImageGC) Start(ctx context.Context) error {
	detect := time.NewTicker(min(g.Period, maxDetectPeriod))
	defer detect.Stop()
	collect := time.NewTicker(g.Period)
	defer collect.Stop()
	g.collect(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-detect.C:
			g.mu.Lock()
			_, err := g.detect(ctx)
			g.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				g.Log.Error(err, "Unable to detect images")
			}
		case <-collect.C:
			g.collect(ctx)
		}
	}
}

// collect runs GarbageCollect and reports a failure as the kubelet does: a
// log line, and an ImageGCFailed Event when it failed the time before too.
func (g *ImageGC) collect(ctx context.Context) {
	err := g.GarbageCollect(ctx)
	if ctx.Err() != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		g.prevFailed = false
		return
	}
	if g.prevFailed {
		g.Log.Error(err, "Image garbage collection failed multiple times in a row")
		g.event(EventImageGCFailed, err.Error())
	} else {
		g.Log.Error(err, "Image garbage collection failed once")
	}
	g.prevFailed = true
}

func (g *ImageGC) event(reason, message string) {
	if g.Recorder != nil && g.Node != nil {
		g.Recorder.Event(g.Node, corev1.EventTypeWarning, reason, message)
	}
}

// GarbageCollect runs image GC once: images unused for longer than MaxAge
// go, then, when the image filesystem is at or above the high threshold,
// images least recently used first until it is below the low one. Not
// finding enough to remove records FreeDiskSpaceFailed on the Node and is
// an error.
func (g *ImageGC) GarbageCollect(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	images, err := g.detect(ctx)
	if err != nil {
		return err
	}
	now := g.Clock.Now()
	if old := SelectImagesByAge(images, g.Policy.MinAge, g.Policy.MaxAge, now); len(old) > 0 {
		removed, _, err := g.remove(ctx, old, metrics.ImageGCReasonAge)
		if err != nil {
			return err
		}
		images = slices.DeleteFunc(images, func(r ImageRecord) bool { return removed[r.ID] })
	}
	if g.Policy.HighThresholdPercent >= 100 {
		return nil
	}
	capacity, available, err := g.imageFs(ctx)
	if err != nil {
		return err
	}
	usage, toFree := SpaceToFree(capacity, available, g.Policy.HighThresholdPercent, g.Policy.LowThresholdPercent)
	if toFree <= 0 {
		return nil
	}
	g.Log.Info("Image filesystem usage over the high threshold, removing images", "usage", usage,
		"highThreshold", g.Policy.HighThresholdPercent, "lowThreshold", g.Policy.LowThresholdPercent, "bytesToFree", toFree)
	selected, _ := SelectImagesForSpace(images, toFree, g.Policy.MinAge, now)
	_, freed, err := g.remove(ctx, selected, metrics.ImageGCReasonSpace)
	if err != nil {
		return err
	}
	if freed < toFree {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", toFree, freed)
		g.event(EventFreeDiskSpaceFailed, msg)
		return errors.New(msg)
	}
	return nil
}

// DeleteUnusedImages removes every image image GC may remove (unused, not
// pinned, not the sandbox image, known for at least the minimum age), least
// recently used first, and returns the bytes their sizes add up to.
func (g *ImageGC) DeleteUnusedImages(ctx context.Context) (freedBytes int64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	images, err := g.detect(ctx)
	if err != nil {
		return 0, err
	}
	_, freed, err := g.remove(ctx, SelectUnusedImages(images, g.Policy.MinAge, g.Clock.Now()), metrics.ImageGCReasonSpace)
	return freed, err
}

// remove removes images, counting them under reason, and returns the IDs
// removed and the sum of their sizes. It goes on after a failure and
// returns the failures joined.
func (g *ImageGC) remove(ctx context.Context, images []ImageRecord, reason string) (map[string]bool, int64, error) {
	removed := map[string]bool{}
	var freed int64
	var errs []error
	for _, img := range images {
		if err := g.Runtime.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: img.ID}); err != nil {
			errs = append(errs, err)
			continue
		}
		g.Log.Info("Removed image", "image", img.ID, "tags", img.Tags, "size", img.Size, "reason", reason)
		metrics.ImageGarbageCollected.WithLabelValues(reason).Inc()
		delete(g.records, img.ID)
		if g.Removed != nil {
			g.Removed(img.ID)
		}
		removed[img.ID] = true
		freed += img.Size
	}
	return removed, freed, errors.Join(errs...)
}

// imageFs returns the capacity and available bytes of the filesystem the
// runtime keeps images on.
func (g *ImageGC) imageFs(ctx context.Context) (capacity, available int64, err error) {
	info, err := g.Runtime.ImageFsInfo(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the image filesystem: %w", err)
	}
	fss := info.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return 0, 0, errors.New("reading the image filesystem: the runtime reports none")
	}
	stat := g.Stat
	if stat == nil {
		stat = Statfs
	}
	return stat(fss[0].GetFsId().GetMountpoint())
}

// detect lists the runtime's images and the images its containers use, and
// updates what image GC knows of them; the caller holds g.mu.
func (g *ImageGC) detect(ctx context.Context) ([]ImageRecord, error) {
	listedAt := g.Clock.Now()
	listed, err := g.Runtime.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("detecting images: %w", err)
	}
	if g.Listed != nil {
		g.Listed(listed, listedAt)
	}
	inUse, err := g.Runtime.ImagesInUse(ctx)
	if err != nil {
		return nil, fmt.Errorf("detecting images: %w", err)
	}
	if g.VolumeImages != nil {
		refs, err := g.VolumeImages(ctx)
		if err != nil {
			return nil, fmt.Errorf("detecting images: %w", err)
		}
		for _, ref := range refs {
			inUse[ref] = true
			inUse[NormalizeReference(ref)] = true
		}
	}
	if g.SandboxImage == "" && !g.sandboxImageAsked {
		if src, ok := g.Runtime.(SandboxImageSource); ok {
			img, err := src.SandboxImage(ctx)
			if err != nil {
				return nil, fmt.Errorf("detecting images: %w", err)
			}
			// "" from a runtime that pins its sandbox image instead.
			g.SandboxImage, g.sandboxImageAsked = img, true
		}
	}
	if g.records == nil {
		g.records = map[string]*ImageRecord{}
	}
	return Detect(g.records, listed, inUse, g.SandboxImage, g.Clock.Now()), nil
}

// Detect updates records (by image ID) with the runtime's images: an image
// seen for the first time is first detected at now; an image whose ID, tag
// or digest inUse holds is used at now; the image named (by ID, tag or
// digest) sandboxImage is the sandbox image; records of images no longer
// listed are dropped. It returns the records, sorted by ID.
func Detect(records map[string]*ImageRecord, listed []*runtimeapi.Image, inUse map[string]bool, sandboxImage string, now time.Time) []ImageRecord {
	seen := map[string]bool{}
	for _, img := range listed {
		id := img.GetId()
		if id == "" {
			continue
		}
		seen[id] = true
		r, ok := records[id]
		if !ok {
			r = &ImageRecord{ID: id, FirstDetected: now}
			records[id] = r
		}
		r.Tags, r.Digests = img.GetRepoTags(), img.GetRepoDigests()
		r.Size = int64(img.GetSize()) //nolint:gosec // image sizes fit
		r.Pinned = img.GetPinned()
		names := append([]string{id}, append(slices.Clone(r.Tags), r.Digests...)...)
		r.InUse, r.Sandbox = false, false
		for _, n := range names {
			r.InUse = r.InUse || inUse[n]
			r.Sandbox = r.Sandbox || (sandboxImage != "" && n == sandboxImage)
		}
		if r.InUse {
			r.LastUsed = now
		}
	}
	out := make([]ImageRecord, 0, len(seen))
	for id, r := range records {
		if !seen[id] {
			delete(records, id)
			continue
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b ImageRecord) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
