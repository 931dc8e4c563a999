// Package containerlogs manages the containers' log files the way the
// kubelet's container log manager does: every monitor interval it rotates
// each running container's log that grew past the configured size (the
// current file renamed to <log>.<timestamp> and reopened by the runtime,
// older rotated files gzip-compressed, the oldest removed so that at most
// the configured number of files remain), and it keeps the links log
// shippers read, <linksDir>/<pod>_<namespace>_<container>-<id>.log, in step
// with the containers nodelet holds. Each pod log directory nodelet makes
// carries a marker naming its node (PodDirMarker), so that where a kubelet
// shares the pod log directory or the links directory, nodelet tells its
// own directories and links from the kubelet's and sweeps only its own.
// What to do with one log and with the links is a pure plan (PlanRotation,
// LinkName, PlanLinkSweep), table-tested; Manager carries it out and never
// writes, renames or removes anything outside the pod log directory but the
// links that point into it.
package containerlogs
