// Package gc is the node's garbage collection of dead containers, dead
// sandboxes and unused images, the kubelet's container and image GC.
//
// Each collector is a pure selection (SelectContainers, SelectImagesByAge,
// SelectImagesForSpace, SpaceToFree), table-tested, and an actor that reads
// the runtime, selects, removes, and reports (ContainerGC, ImageGC); both
// run periodically as manager runnables and expose one call for the
// eviction manager when the node is short of disk
// (ContainerGC.DeleteAllUnusedContainers, ImageGC.DeleteUnusedImages).
// Container GC never removes what a pod's worker is about to use: the newest
// dead instance of each container of a pod that still exists (its lastState
// and previous logs), the newest sandbox of such a pod, and anything
// created, running or not yet old enough. Image GC never removes an image a
// container on the runtime uses (whoever made it), the runtime's sandbox
// image, a pinned image, or one detected less than the minimum age ago.
package gc
