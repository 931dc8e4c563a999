package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Signals of local storage limits, as the kubelet names them in its
// metrics.
const (
	SignalEmptyDirFsLimit           Signal = "emptydirfs.limit"
	SignalEphemeralPodFsLimit       Signal = "ephemeralpodfs.limit"
	SignalEphemeralContainerFsLimit Signal = "ephemeralcontainerfs.limit"
)

// LocalStorageViolation says why a pod must be evicted at once for its use
// of local ephemeral storage: the limit's signal and the kubelet's message;
// "" when it need not. Checked in the kubelet's order: a disk-backed emptyDir volume used
// past its sizeLimit, the pod's usage past the sum of its containers'
// ephemeral-storage limits, a container's writable layer and logs past its
// own limit. Usage not measured is never a violation; a volume whose walk
// could not count every entry is past its sizeLimit and makes the pod past
// its limit: what the walk left out is usage a pod could hide.
func LocalStorageViolation(p PodUsage) (Signal, string) {
	pod := p.Pod
	for _, vol := range pod.Spec.Volumes {
		ed := vol.EmptyDir
		if ed == nil || ed.Medium == v1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		used, ok := p.Volumes[vol.Name]
		if ok && (used.Incomplete || quantity(used.Bytes).Cmp(*ed.SizeLimit) > 0) {
			return SignalEmptyDirFsLimit, fmt.Sprintf(emptyDirMessageFmt, vol.Name, ed.SizeLimit.String())
		}
	}
	// Only a container's or the pod's own limit makes a pod limit (the
	// overhead adds to one): most pods have none, and are checked often.
	if p.Ephemeral != nil && (hasEphemeralLimit(pod) || pod.Spec.Resources != nil) {
		limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
		if limit, ok := limits[v1.ResourceEphemeralStorage]; ok && !limit.IsZero() && (p.incomplete() || quantity(*p.Ephemeral).Cmp(limit) > 0) {
			return SignalEphemeralPodFsLimit, fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String())
		}
	}
	for _, cu := range p.Containers {
		c := containerSpec(pod, cu.Name)
		if c == nil || cu.Ephemeral == nil {
			continue
		}
		limit, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if ok && quantity(*cu.Ephemeral).Cmp(limit) > 0 {
			return SignalEphemeralContainerFsLimit, fmt.Sprintf(containerEphemeralStorageMsFmt, c.Name, limit.String())
		}
	}
	return "", ""
}
