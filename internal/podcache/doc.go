// Package podcache reads this node's pods from the manager's cache without
// copying them. The pod controller, housekeeping, the garbage collectors
// and the eviction manager read every pod of the node, some of them every
// few seconds; a List through the cache's client makes a slice of pod
// values each time (a copy of each pod's top-level struct, 2–3 KiB a pod),
// even when it is told not to deep-copy them.
//
// What it returns are the informer's own objects: the informer replaces an
// object on an update and never changes one in place, and neither may
// anyone who reads them.
package podcache
