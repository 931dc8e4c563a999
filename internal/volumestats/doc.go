// Package volumestats measures the volumes of the node's pods in the
// background and keeps the latest numbers, which the node API's
// /stats/summary (the pods' volume list and their ephemeral storage) and
// the kubelet_volume_stats_* metrics read without measuring.
//
// A Calculator lists the node's pods every volumeStatsAggPeriod; it measures
// a pod's volumes as soon as it sees the pod and then every period, with a
// jitter of up to one period, after the last measure ended, replacing that
// pod's cached result, and forgets a pod that is gone, as the kubelet's
// volume stats calculators do. Unlike the kubelet's, which run a goroutine
// per pod for the pod's whole life, one goroutine keeps the schedule, and
// each measure runs on a goroutine of its own only while it measures (a
// walk of a large directory holds up no other pod); the measures after a
// pod's first fall on whole seconds, so that those due within a second
// wake the schedule once. A
// VolumeSource says where each volume lives on the node and how it is
// measured (a walk of the directory, statfs of its file system, the CSI
// driver, or not at all); the volume manager implements it.
//
// DiskUsage and Statfs are the measurement primitives: DiskUsage walks a
// directory without following symbolic links or crossing mount points,
// counting every entry within a time budget (DefaultWalkBudget); a walk that
// could not count them all returns what it counted with ErrIncomplete, which
// a caller enforcing a limit takes as past it. The Calculator keeps such a
// lower bound and logs it once for the pod's volume.
package volumestats
