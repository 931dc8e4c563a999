package memlimit

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestNeededAndLimit(t *testing.T) {
	// 10 MiB live of 14 MiB of objects, 2 MiB free, 1 MiB released,
	// 0.5 MiB unused in spans, and 6 MiB outside the heap: 22.5 MiB held.
	s := Sample{LiveHeap: 10 * mib, HeapObjects: 14 * mib, HeapFree: 2 * mib, HeapReleased: mib, HeapUnused: mib / 2}
	s.Total = s.HeapObjects + s.HeapFree + s.HeapReleased + s.HeapUnused + 6*mib
	if got, want := s.Needed(), uint64(16.5*mib); got != want {
		t.Fatalf("Needed = %d, want %d", got, want)
	}
	if got, want := s.Held(), uint64(22.5*mib); got != want {
		t.Fatalf("Held = %d, want %d", got, want)
	}
	// After a burst: the same, with 40 MiB of the heap free and not yet
	// returned (62.5 MiB held).
	burst := s
	burst.HeapFree += 40 * mib
	burst.Total += 40 * mib
	for _, tc := range []struct {
		name string
		s    Sample
		o    Options
		want int64
	}{
		{"headroom over what is needed", s, Options{HeadroomPercent: 50}, 24.75 * mib},
		{"no lower than half-way to what is held", s, Options{}, 19.5 * mib},
		{"half-way after a burst", burst, Options{HeadroomPercent: 50}, 43.625 * mib},
		{"the floor when the process is small", s, Options{HeadroomPercent: 50, Floor: 32 * mib}, 32 * mib},
		{"never above the ceiling", s, Options{HeadroomPercent: 50, Ceiling: 20 * mib}, 20 * mib},
		{"the ceiling wins over the floor", s, Options{HeadroomPercent: 50, Floor: 32 * mib, Ceiling: 20 * mib}, 20 * mib},
		{"the ceiling wins after a burst", burst, Options{HeadroomPercent: 50, Ceiling: 30 * mib}, 30 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Limit(tc.s, tc.o); got != tc.want {
				t.Errorf("Limit = %.3f MiB, want %.3f MiB", float64(got)/mib, float64(tc.want)/mib)
			}
		})
	}
	// The runtime's heap goal under a limit is the limit less what it
	// holds outside the heap's objects and less what it holds over the
	// limit (runtime/mgcpacer.go, memoryLimitHeapGoal). Right after a
	// burst it must stay the headroom over the live heap, not fall to the
	// live heap itself (a collection after every few allocations).
	for _, tc := range []struct {
		name string
		s    Sample
	}{{"at rest", s}, {"after a burst", burst}} {
		l := float64(Limit(tc.s, Options{HeadroomPercent: 50}))
		held := float64(tc.s.Held())
		outside := held - float64(tc.s.HeapFree) - float64(tc.s.HeapObjects)
		goal := l - outside - max(held-l, 0)
		if want := 1.5*float64(tc.s.LiveHeap) + 0.5*outside; goal < want-1 {
			t.Errorf("%s: the runtime's heap goal would be %.2f MiB, want %.2f MiB (half again the live heap and half what is outside it)",
				tc.name, goal/mib, want/mib)
		}
	}
	// A runtime that reports less in total than in its heap's classes
	// (it never should) leaves only the live heap, not a wrapped-around
	// number.
	if got := (Sample{LiveHeap: mib, Total: mib, HeapObjects: 2 * mib}).Needed(); got != mib {
		t.Errorf("Needed of an inconsistent sample = %d, want %d", got, mib)
	}
	if got := (Sample{Total: mib, HeapReleased: 2 * mib}).Held(); got != 0 {
		t.Errorf("Held of an inconsistent sample = %d, want 0", got)
	}
}

// limitAfterGC collects until the keeper has set a limit from a sample
// read after a collection that began after the call (a finalizer of an
// earlier collection may still run late, with that one's live heap), and
// returns it.
func limitAfterGC(t *testing.T, k *Keeper) int64 {
	t.Helper()
	c := []metrics.Sample{{Name: metricCycles}}
	metrics.Read(c)
	since := c[0].Value.Uint64()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		k.mu.Lock()
		l, cycles := k.last, k.cycles
		k.mu.Unlock()
		if cycles > since {
			return l
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no limit set after a collection")
	return 0
}

var sink [][]byte

func TestKeeperFollowsTheLiveMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	k := Start(Options{HeadroomPercent: 50, Floor: mib})
	if k == nil {
		t.Fatal("Start returned no keeper")
	}
	t.Cleanup(k.Stop)

	small := limitAfterGC(t, k)
	if got := debug.SetMemoryLimit(-1); got != small {
		t.Fatalf("the runtime's limit is %d, the keeper's %d", got, small)
	}
	for range 64 {
		sink = append(sink, make([]byte, mib))
	}
	large := limitAfterGC(t, k)
	if large < small+90*mib {
		t.Errorf("with 64 MiB more live the limit went from %.1f to %.1f MiB, want about 96 MiB more (64 MiB and half again)", float64(small)/mib, float64(large)/mib)
	}
	sink = nil
	// The freed pages count until the scavenger returns them; the limit
	// comes down half-way to its target with each collection until then.
	debug.FreeOSMemory()
	after := limitAfterGC(t, k)
	if after > small+8*mib {
		t.Errorf("with the 64 MiB gone the limit is %.1f MiB, want about %.1f MiB", float64(after)/mib, float64(small)/mib)
	}

	k.Stop()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after Stop the limit is %d, want the process's own %d", got, before)
	}
	runtime.GC()
	runtime.GC()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("a collection after Stop set the limit to %d", got)
	}
}

func TestGOMEMLIMITOffTurnsItOff(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	if k := Start(Options{HeadroomPercent: 50}); k != nil {
		k.Stop()
		t.Fatal("Start kept a limit with GOMEMLIMIT=off")
	}
}

func TestStopRestoresTheCeiling(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	k := Start(Options{HeadroomPercent: 50, Ceiling: 512 * mib})
	if l := limitAfterGC(t, k); l > 512*mib {
		t.Errorf("limit %d above the ceiling", l)
	}
	k.Stop()
	if got := debug.SetMemoryLimit(-1); got != 512*mib {
		t.Errorf("after Stop the limit is %d, want the ceiling", got)
	}
}
