package volume

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/mount-utils"
)

// TestMountTableReadsAfterEachCall calls List from many goroutines at once:
// every caller gets a table whose read began after its call, no two reads
// run at once, and callers share reads.
func TestMountTableReadsAfterEachCall(t *testing.T) {
	const callers = 50
	var seq atomic.Int64
	var running, reads atomic.Int32
	tab := &mountTable{list: func() ([]mount.MountPoint, error) {
		if running.Add(1) != 1 {
			t.Error("two reads of the table at once")
		}
		defer running.Add(-1)
		reads.Add(1)
		began := seq.Add(1)
		time.Sleep(20 * time.Millisecond)
		return []mount.MountPoint{{Path: strconv.FormatInt(began, 10)}}, nil
	}}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			called := seq.Add(1)
			mps, err := tab.List()
			if err != nil || len(mps) != 1 {
				t.Errorf("List() = %v, %v", mps, err)
				return
			}
			if began, _ := strconv.ParseInt(mps[0].Path, 10, 64); began < called {
				t.Errorf("a caller at %d got a table read at %d", called, began)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n >= callers {
		t.Errorf("%d reads for %d callers at once, want them shared", n, callers)
	}
}

// TestMountTableSequential reads the table again for each call that comes
// after the last read, and returns its error.
func TestMountTableSequential(t *testing.T) {
	reads := 0
	failed := errors.New("no table")
	tab := &mountTable{list: func() ([]mount.MountPoint, error) {
		reads++
		if reads == 3 {
			return nil, failed
		}
		return []mount.MountPoint{{Path: "/m"}}, nil
	}}
	for i := range 3 {
		mps, err := tab.List()
		if i < 2 && (err != nil || len(mps) != 1) {
			t.Fatalf("call %d: List() = %v, %v", i, mps, err)
		}
		if i == 2 && !errors.Is(err, failed) {
			t.Fatalf("call %d: error %v, want %v", i, err, failed)
		}
	}
	if reads != 3 {
		t.Fatalf("%d reads for 3 calls one after the other, want 3", reads)
	}
}
