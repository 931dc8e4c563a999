package memprofile

import "runtime"

// startRate is the rate the runtime set before any package's init: Go's
// default, one allocation sampled in every 512 KiB on average, unless
// GODEBUG=memprofilerate=N chose another.
var startRate int

func init() {
	startRate = runtime.MemProfileRate
	runtime.MemProfileRate = 0
}

// Enable turns memory profiling back on at the rate the process started
// with (GODEBUG=memprofilerate is honoured). A heap profile then holds what
// was allocated after the call, not before it.
func Enable() {
	runtime.MemProfileRate = startRate
}
