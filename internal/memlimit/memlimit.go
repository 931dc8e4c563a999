package memlimit

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The runtime/metrics a Sample is read from.
const (
	metricLiveHeap     = "/gc/heap/live:bytes"
	metricTotal        = "/memory/classes/total:bytes"
	metricHeapReleased = "/memory/classes/heap/released:bytes"
	metricHeapFree     = "/memory/classes/heap/free:bytes"
	metricHeapObjects  = "/memory/classes/heap/objects:bytes"
	metricHeapUnused   = "/memory/classes/heap/unused:bytes"
	metricCycles       = "/gc/cycles/total:gc-cycles"
)

// Sample is the process's memory as the runtime reports it after a
// garbage collection.
type Sample struct {
	// LiveHeap is the heap the last collection marked live.
	LiveHeap uint64
	// Total is all the memory the runtime maps; HeapReleased the part of
	// it returned to the operating system, HeapFree the free heap not yet
	// returned, HeapObjects the heap's objects (live and dead) and
	// HeapUnused the heap reserved for objects but not used by any.
	Total, HeapReleased, HeapFree, HeapObjects, HeapUnused uint64
	// Cycles counts the collections completed when it was read: LiveHeap
	// is the last one's.
	Cycles uint64
}

// Needed is what the process holds that a collection cannot give back:
// the live heap, the room in the heap's spans that no object uses (a
// span goes back only once all its objects are dead) and everything the
// runtime maps outside the heap. The runtime counts the same outside its
// heap goal when it holds the process to the limit.
func (s Sample) Needed() uint64 {
	heap := s.HeapReleased + s.HeapFree + s.HeapObjects + s.HeapUnused
	if s.Total < heap {
		return s.LiveHeap
	}
	return s.LiveHeap + s.HeapUnused + s.Total - heap
}

// Held is what the process holds from the operating system now: all the
// runtime maps less what it has released.
func (s Sample) Held() uint64 {
	if s.Total < s.HeapReleased {
		return 0
	}
	return s.Total - s.HeapReleased
}

// Options are the limit's terms.
type Options struct {
	// HeadroomPercent is how much more than Needed the process may hold,
	// in percent of Needed.
	HeadroomPercent int
	// Floor is the lowest limit, so that a small process does not collect
	// for every few allocations.
	Floor int64
	// Ceiling is the highest limit; zero or less means none.
	Ceiling int64
}

// Limit returns the memory limit for s: HeadroomPercent over Needed,
// within Floor and Ceiling, but no lower than half-way between that and
// what the process holds now (Held). The runtime lowers its heap goal by
// as much as it holds over the limit, until the scavenger has returned
// the difference: a limit far below what is held (the moment after many
// objects died, their pages free but not yet returned) would bring the
// goal down to the live heap and start one collection after another. Half
// the way leaves the goal the headroom's, and each collection halves what
// is held over the target.
func Limit(s Sample, o Options) int64 {
	needed := float64(s.Needed())
	limit := needed + needed*float64(o.HeadroomPercent)/100
	if held := float64(s.Held()); held > limit {
		limit += (held - limit) / 2
	}
	if limit > math.MaxInt64/2 {
		limit = math.MaxInt64 / 2
	}
	l := max(int64(limit), o.Floor)
	if o.Ceiling > 0 {
		l = min(l, o.Ceiling)
	}
	return l
}

// Read reads a Sample from the runtime.
func Read() Sample {
	samples := []metrics.Sample{
		{Name: metricLiveHeap}, {Name: metricTotal}, {Name: metricHeapReleased},
		{Name: metricHeapFree}, {Name: metricHeapObjects}, {Name: metricHeapUnused},
		{Name: metricCycles},
	}
	metrics.Read(samples)
	v := make([]uint64, len(samples))
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	return Sample{LiveHeap: v[0], Total: v[1], HeapReleased: v[2], HeapFree: v[3], HeapObjects: v[4], HeapUnused: v[5], Cycles: v[6]}
}

// Keeper sets the limit after every garbage collection until stopped.
type Keeper struct {
	opts Options
	// mu orders the updates and Stop; the fields below are guarded by it.
	mu      sync.Mutex
	stopped bool
	// last is the limit set last, from a Sample read after cycles
	// collections.
	last   int64
	cycles uint64
}

// Start keeps the limit with opts, a GOMEMLIMIT of the environment as
// opts.Ceiling unless it is set, from the next collection on. It returns
// nil when GOMEMLIMIT=off.
func Start(opts Options) *Keeper {
	if os.Getenv("GOMEMLIMIT") == "off" {
		return nil
	}
	if opts.Ceiling <= 0 {
		// A negative argument reads the limit without changing it: the
		// environment's, or math.MaxInt64 when it set none.
		if c := debug.SetMemoryLimit(-1); c != math.MaxInt64 {
			opts.Ceiling = c
		}
	}
	k := &Keeper{opts: opts}
	k.arm()
	return k
}

// Current returns the limit set last, or zero before the first
// collection.
func (k *Keeper) Current() int64 {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last
}

// Stop stops following the memory and restores the limit the process had
// (its GOMEMLIMIT, or none).
func (k *Keeper) Stop() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	k.stopped = true
	ceiling := int64(math.MaxInt64)
	if k.opts.Ceiling > 0 {
		ceiling = k.opts.Ceiling
	}
	debug.SetMemoryLimit(ceiling)
}

// gcSentinel is garbage the moment it is made: its finalizer runs after
// the next collection. It holds a pointer so that the allocator never
// batches it with other small objects, which would delay its finalizer.
type gcSentinel struct {
	k *Keeper
}

// arm makes a sentinel whose finalizer updates the limit and arms the
// next one.
func (k *Keeper) arm() {
	runtime.SetFinalizer(&gcSentinel{k: k}, func(s *gcSentinel) {
		if s.k.update() {
			s.k.arm()
		}
	})
}

// update sets the limit from the memory now; false once stopped.
func (k *Keeper) update() bool {
	s := Read()
	l := Limit(s, k.opts)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	debug.SetMemoryLimit(l)
	k.last, k.cycles = l, s.Cycles
	return true
}
