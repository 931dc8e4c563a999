// Package nomount removes directory trees that a pod could have written
// into without ever following the removal into a mount. A pod's volume or
// log directory is torn down after its mounts were listed and unmounted,
// but a mount can appear in between (a privileged container with
// Bidirectional propagation, a CSI driver, a racing bind mount): removing
// through it would delete the content of another file system, the host's
// own included. RemoveAll walks the tree by directory file descriptors and
// opens every directory with openat2's RESOLVE_NO_XDEV, so that a mount
// point anywhere below stops the removal with ErrMountPoint and leaves what
// is mounted there untouched.
package nomount
