// Package volumestats measures the volumes of the node's pods in the
// background and keeps the latest numbers, which the node API's
// /stats/summary (the pods' volume list and their ephemeral storage) and
// the kubelet_volume_stats_* metrics read without measuring.
//
// A Calculator lists the node's pods every volumeStatsAggPeriod; it starts
// one measuring loop per pod it sees for the first time and stops the loop
// of a pod that is gone, as the kubelet's volume stats calculators do. Each
// loop measures the pod's volumes once at start and then every period with
// a jitter of up to one period, and replaces that pod's cached result. A
// VolumeSource says where each volume lives on the node and how it is
// measured (a walk of the directory, statfs of its file system, the CSI
// driver, or not at all); the volume manager implements it.
//
// DiskUsage and Statfs are the measurement primitives: DiskUsage walks a
// directory without following symbolic links or crossing mount points.
package volumestats
