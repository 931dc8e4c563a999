// Package memlimit keeps the Go runtime's soft memory limit at a fixed
// headroom over what the process cannot give back: its live heap, the
// room in the heap's spans no object uses, and all the runtime maps
// outside the heap (goroutine stacks, the collector's and the allocator's
// metadata). It re-reads those after every garbage collection
// (runtime/metrics) and sets the limit (debug.SetMemoryLimit).
//
// GOGC bounds only the heap's growth, so on its own it leaves the pages the
// heap freed resident until the background scavenger returns them, slowly,
// and lets a short burst of allocations (a node's pods deleted at once)
// take the heap to its goal on top of them. A limit that follows the live
// memory makes the scavenger return free pages as soon as the process
// nears it, and brings a collection forward when a burst would pass it. As
// it never falls below the headroom over what is live, it cannot make the
// collector run back to back the way a fixed limit does once the live
// memory grows past it (a node with more pods, or larger ones). Nor does
// it fall more than half-way below what the process holds: the runtime
// lowers its heap goal by whatever it holds over the limit, so a limit set
// far under the pages just freed (every pod of a node deleted at once)
// would bring the goal down to the live heap and the collector back to
// back until the scavenger caught up.
//
// A GOMEMLIMIT in the environment stays a ceiling: the limit never rises
// above it. GOMEMLIMIT=off turns the package off.
package memlimit
