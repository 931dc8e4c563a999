package memprofile

import "runtime"

// DefaultRate is Go's own memory profiling rate: an allocation sampled in
// every DefaultRate bytes on average.
const DefaultRate = 512 * 1024

func init() {
	runtime.MemProfileRate = 0
}

// Enable turns memory profiling back on at DefaultRate. A heap profile
// then holds what was allocated after the call, not before it.
func Enable() {
	runtime.MemProfileRate = DefaultRate
}
