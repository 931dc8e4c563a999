package gc

import (
	"cmp"
	"slices"
	"time"
)

// ImagePolicy is the image GC fields of the configuration.
type ImagePolicy struct {
	// HighThresholdPercent is the image filesystem usage at which images
	// are removed; 100 or more disables removal by usage.
	HighThresholdPercent int
	// LowThresholdPercent is the usage removal brings the filesystem to.
	LowThresholdPercent int
	// MinAge is how long an image must have been known before it may be
	// removed.
	MinAge time.Duration
	// MaxAge removes an image unused for longer; 0 disables.
	MaxAge time.Duration
}

// ImageRecord is what image GC knows of one image.
type ImageRecord struct {
	// ID is the runtime's image ID.
	ID string
	// Tags and Digests are the image's references.
	Tags, Digests []string
	// Size is the image's size as the runtime reports it.
	Size int64
	// FirstDetected is when image GC first saw the image; LastUsed when it
	// last saw a container use it (zero when never).
	FirstDetected, LastUsed time.Time
	// InUse is true when a container of the runtime uses the image now.
	InUse bool
	// Pinned is true when the runtime asks that the image never be removed.
	Pinned bool
	// Sandbox is true for the runtime's sandbox (pause) image.
	Sandbox bool
}

// unusedSince is when the image was last used, or first detected when it
// never was.
func (r ImageRecord) unusedSince() time.Time {
	if r.LastUsed.After(r.FirstDetected) {
		return r.LastUsed
	}
	return r.FirstDetected
}

// Evictable reports whether image GC may remove the image at now: not used
// now, neither pinned nor the sandbox image, and known for at least minAge.
func (r ImageRecord) Evictable(minAge time.Duration, now time.Time) bool {
	return !r.InUse && !r.Pinned && !r.Sandbox && !r.FirstDetected.Add(minAge).After(now)
}

// SpaceToFree is the kubelet's threshold arithmetic over the image
// filesystem: the usage in percent (100 - available*100/capacity, rounded
// down), and the bytes to free to bring it to low percent when it is at or
// above high percent (capacity*(100-low)/100 - available), else 0. A high
// threshold of 100 or more, or an unknown capacity, frees nothing.
func SpaceToFree(capacity, available int64, high, low int) (usagePercent int, toFree int64) {
	if capacity <= 0 {
		return 0, 0
	}
	available = min(max(available, 0), capacity)
	usagePercent = 100 - int(available*100/capacity)
	if high >= 100 || usagePercent < high {
		return usagePercent, 0
	}
	toFree = capacity*int64(100-low)/100 - available
	return usagePercent, max(toFree, 0)
}

// evictionOrder returns the evictable images, least recently used first;
// never used before used, ties by first detection, then by ID.
func evictionOrder(images []ImageRecord, minAge time.Duration, now time.Time) []ImageRecord {
	var out []ImageRecord
	for _, img := range images {
		if img.Evictable(minAge, now) {
			out = append(out, img)
		}
	}
	slices.SortStableFunc(out, func(a, b ImageRecord) int {
		return cmp.Or(a.LastUsed.Compare(b.LastUsed), a.FirstDetected.Compare(b.FirstDetected), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// SelectImagesForSpace picks evictable images, least recently used first,
// until their sizes add up to toFree, and returns them with that sum, which
// is less than toFree when not enough is evictable.
func SelectImagesForSpace(images []ImageRecord, toFree int64, minAge time.Duration, now time.Time) (selected []ImageRecord, freed int64) {
	if toFree <= 0 {
		return nil, 0
	}
	for _, img := range evictionOrder(images, minAge, now) {
		if freed >= toFree {
			break
		}
		selected = append(selected, img)
		freed += img.Size
	}
	return selected, freed
}

// SelectImagesByAge picks the evictable images unused (or, never used,
// known) for longer than maxAge; none when maxAge is 0.
func SelectImagesByAge(images []ImageRecord, minAge, maxAge time.Duration, now time.Time) []ImageRecord {
	if maxAge <= 0 {
		return nil
	}
	var out []ImageRecord
	for _, img := range evictionOrder(images, minAge, now) {
		if now.Sub(img.unusedSince()) > maxAge {
			out = append(out, img)
		}
	}
	return out
}

// SelectUnusedImages picks every evictable image, least recently used
// first: what DeleteUnusedImages removes.
func SelectUnusedImages(images []ImageRecord, minAge time.Duration, now time.Time) []ImageRecord {
	return evictionOrder(images, minAge, now)
}
