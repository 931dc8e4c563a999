package gc

import (
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const mi = 1 << 20

func TestSpaceToFree(t *testing.T) {
	cases := []struct {
		name                string
		capacity, available int64
		high, low           int
		wantUsage           int
		wantToFree          int64
	}{
		{name: "below high", capacity: 100 * mi, available: 30 * mi, high: 85, low: 80, wantUsage: 70},
		{name: "at high frees down to low", capacity: 100 * mi, available: 15 * mi, high: 85, low: 80, wantUsage: 85, wantToFree: 5 * mi},
		{name: "above high", capacity: 100 * mi, available: 2 * mi, high: 85, low: 80, wantUsage: 98, wantToFree: 18 * mi},
		{name: "usage rounds up (available rounds down)", capacity: 1000, available: 149, high: 86, low: 80, wantUsage: 86, wantToFree: 51},
		{name: "high 100 disables", capacity: 100 * mi, available: 0, high: 100, low: 80, wantUsage: 100},
		{name: "low 0 frees everything", capacity: 100, available: 10, high: 50, low: 0, wantUsage: 90, wantToFree: 90},
		{name: "unknown capacity", capacity: 0, available: 0, high: 50, low: 40},
		{name: "available above capacity", capacity: 100, available: 200, high: 50, low: 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			usage, toFree := SpaceToFree(tc.capacity, tc.available, tc.high, tc.low)
			if usage != tc.wantUsage || toFree != tc.wantToFree {
				t.Fatalf("SpaceToFree = %d%%, %d; want %d%%, %d", usage, toFree, tc.wantUsage, tc.wantToFree)
			}
		})
	}
}

func rec(id string, size int64, detectedAgo, usedAgo time.Duration) ImageRecord {
	r := ImageRecord{ID: id, Size: size, FirstDetected: t0.Add(-detectedAgo)}
	if usedAgo >= 0 {
		r.LastUsed = t0.Add(-usedAgo)
	}
	return r
}

func imageIDs(images []ImageRecord) []string {
	var out []string
	for _, img := range images {
		out = append(out, img.ID)
	}
	return out
}

func TestSelectImagesForSpace(t *testing.T) {
	h := time.Hour
	inUse := rec("used", 100, h, 0)
	inUse.InUse = true
	pinned := rec("pinned", 100, h, -1)
	pinned.Pinned = true
	sandbox := rec("pause", 100, h, -1)
	sandbox.Sandbox = true
	images := []ImageRecord{
		rec("c-used-recently", 10, h, time.Minute),
		rec("b-used-long-ago", 10, h, 30*time.Minute),
		rec("a-never-used-detected-late", 10, 10*time.Minute, -1),
		rec("z-never-used-detected-early", 10, h, -1),
		rec("young", 100, time.Second, -1),
		inUse, pinned, sandbox,
	}
	cases := []struct {
		name      string
		toFree    int64
		minAge    time.Duration
		want      []string
		wantFreed int64
	}{
		{name: "nothing to free", toFree: 0},
		{name: "never used first, earliest detected first", toFree: 15, minAge: time.Minute,
			want: []string{"z-never-used-detected-early", "a-never-used-detected-late"}, wantFreed: 20},
		{name: "then least recently used", toFree: 30, minAge: time.Minute,
			want: []string{"z-never-used-detected-early", "a-never-used-detected-late", "b-used-long-ago"}, wantFreed: 30},
		{name: "in use, pinned, sandbox and young images never go", toFree: 1000, minAge: time.Minute,
			want: []string{"z-never-used-detected-early", "a-never-used-detected-late", "b-used-long-ago", "c-used-recently"}, wantFreed: 40},
		{name: "minimum age 0 lets the young go", toFree: 1000,
			want: []string{"z-never-used-detected-early", "a-never-used-detected-late", "young", "b-used-long-ago", "c-used-recently"}, wantFreed: 140},
		{name: "minimum age above every detection frees nothing", toFree: 10, minAge: 2 * h},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, freed := SelectImagesForSpace(images, tc.toFree, tc.minAge, t0)
			if !slices.Equal(imageIDs(got), tc.want) || freed != tc.wantFreed {
				t.Fatalf("SelectImagesForSpace = %v, %d; want %v, %d", imageIDs(got), freed, tc.want, tc.wantFreed)
			}
		})
	}
}

func TestSelectImagesByAge(t *testing.T) {
	h := time.Hour
	inUse := rec("used", 100, 3*h, 0)
	inUse.InUse = true
	images := []ImageRecord{
		rec("old-use", 10, 3*h, 2*h),
		rec("recent-use", 10, 3*h, 10*time.Minute),
		rec("never-used-old", 10, 2*h, -1),
		rec("never-used-recent", 10, 10*time.Minute, -1),
		inUse,
	}
	cases := []struct {
		name   string
		maxAge time.Duration
		want   []string
	}{
		{name: "disabled", maxAge: 0},
		{name: "unused (or known, never used) for longer than the maximum age", maxAge: h, want: []string{"never-used-old", "old-use"}},
		{name: "nothing that old", maxAge: 5 * h},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := SelectImagesByAge(images, time.Minute, tc.maxAge, t0)
			if !slices.Equal(imageIDs(got), tc.want) {
				t.Fatalf("SelectImagesByAge = %v, want %v", imageIDs(got), tc.want)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	records := map[string]*ImageRecord{}
	list := []*runtimeapi.Image{
		{Id: "sha256:a", RepoTags: []string{"x/a:1"}, Size: 10},
		{Id: "sha256:b", RepoDigests: []string{"x/b@sha256:bd"}, Size: 20},
		{Id: "sha256:c", Size: 30, Pinned: true},
		{Id: "sha256:p", RepoTags: []string{"x/pause:1"}, Size: 1},
	}
	got := Detect(records, list, map[string]bool{"x/a:1": true}, "x/pause:1", t0)
	byID := map[string]ImageRecord{}
	for _, r := range got {
		byID[r.ID] = r
	}
	if r := byID["sha256:a"]; !r.InUse || !r.LastUsed.Equal(t0) || !r.FirstDetected.Equal(t0) {
		t.Errorf("a = %+v, want in use by its tag, used and detected at t0", r)
	}
	if r := byID["sha256:b"]; r.InUse || !r.LastUsed.IsZero() || r.Size != 20 {
		t.Errorf("b = %+v, want unused, never used, size 20", r)
	}
	if !byID["sha256:c"].Pinned || !byID["sha256:p"].Sandbox {
		t.Errorf("c pinned = %v, p sandbox = %v; want both", byID["sha256:c"].Pinned, byID["sha256:p"].Sandbox)
	}

	// Later: b used by its digest, a no longer, c gone.
	t1 := t0.Add(time.Minute)
	got = Detect(records, list[:2], map[string]bool{"x/b@sha256:bd": true}, "x/pause:1", t1)
	if len(got) != 2 || len(records) != 2 {
		t.Fatalf("after c and p went: %d records, %d kept; want 2", len(got), len(records))
	}
	a, b := got[0], got[1]
	if a.InUse || !a.LastUsed.Equal(t0) || !a.FirstDetected.Equal(t0) {
		t.Errorf("a = %+v, want unused since t0, detected at t0", a)
	}
	if !b.InUse || !b.LastUsed.Equal(t1) || !b.FirstDetected.Equal(t0) {
		t.Errorf("b = %+v, want used at t1, detected at t0", b)
	}
	// By ID too.
	got = Detect(records, list[:1], map[string]bool{"sha256:a": true}, "", t1)
	if !got[0].InUse {
		t.Errorf("a = %+v, want in use by its ID", got[0])
	}
}
