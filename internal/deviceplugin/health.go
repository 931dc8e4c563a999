package deviceplugin

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DeviceHealth is a device's health in a pod's allocatedResourcesStatus:
// Healthy or Unhealthy as its plugin last listed it while the plugin
// runs, Unknown when the plugin is gone, has not listed its devices since
// it registered, or no longer lists the device.
func DeviceHealth(running, listed bool, devices map[string]bool, id string) corev1.ResourceHealthStatus {
	healthy, ok := devices[id]
	switch {
	case !running || !listed || !ok:
		return corev1.ResourceHealthStatusUnknown
	case healthy:
		return corev1.ResourceHealthStatusHealthy
	default:
		return corev1.ResourceHealthStatusUnhealthy
	}
}

// ResourceStatus returns a container's allocatedResourcesStatus entries
// for the devices assigned to it, by resource: one entry named after each
// resource, listing each device by its ID with its health, as the kubelet
// reports them. Entries are sorted by name and devices by ID, so that
// equal states make equal statuses; nil means none.
func ResourceStatus(assigned map[string][]string, health func(resource, id string) corev1.ResourceHealthStatus) []corev1.ResourceStatus {
	var out []corev1.ResourceStatus
	for _, name := range slices.Sorted(maps.Keys(assigned)) {
		ids := slices.Clone(assigned[name])
		slices.Sort(ids)
		ids = slices.Compact(ids)
		if len(ids) == 0 {
			continue
		}
		rs := corev1.ResourceStatus{Name: corev1.ResourceName(name)}
		for _, id := range ids {
			rs.Resources = append(rs.Resources, corev1.ResourceHealth{ResourceID: corev1.ResourceID(id), Health: health(name, id)})
		}
		out = append(out, rs)
	}
	return out
}

// changedDevices returns the devices whose health differs between two
// views of a resource (a device missing from one reads Unknown there),
// sorted.
func changedDevices(before, after map[string]corev1.ResourceHealthStatus) []string {
	read := func(view map[string]corev1.ResourceHealthStatus, id string) corev1.ResourceHealthStatus {
		if h, ok := view[id]; ok {
			return h
		}
		return corev1.ResourceHealthStatusUnknown
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(before)) {
		if read(after, id) != before[id] {
			out = append(out, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after)) {
		if _, seen := before[id]; !seen && after[id] != corev1.ResourceHealthStatusUnknown {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// healthViewLocked returns the health of each device of the resource;
// m.mu is held.
func (m *Manager) healthViewLocked(name string) map[string]corev1.ResourceHealthStatus {
	ep := m.resources[name]
	if ep == nil {
		return nil
	}
	view := make(map[string]corev1.ResourceHealthStatus, len(ep.devices))
	for id := range ep.devices {
		view[id] = DeviceHealth(ep.client != nil, ep.listed, ep.devices, id)
	}
	return view
}

// podsToUpdateLocked returns the pods holding a device of the resource
// whose health changed since before, sorted; m.mu is held.
func (m *Manager) podsToUpdateLocked(name string, before map[string]corev1.ResourceHealthStatus) []types.UID {
	changed := changedDevices(before, m.healthViewLocked(name))
	if len(changed) == 0 {
		return nil
	}
	var out []types.UID
	for k, a := range m.assignments {
		if k.resource == name && slices.ContainsFunc(a.DeviceIDs, func(id string) bool { return slices.Contains(changed, id) }) {
			out = append(out, k.pod)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// healthChanged tells Options.OnHealthChange of the pods whose devices'
// health changed.
func (m *Manager) healthChanged(pods []types.UID) {
	if len(pods) > 0 && m.opts.OnHealthChange != nil {
		m.opts.OnHealthChange(pods)
	}
}

// ResourceStatus returns, by container name, the allocatedResourcesStatus
// entries of pod's containers for the devices assigned to them (see
// ResourceStatus); init containers get none, as from the kubelet.
func (m *Manager) ResourceStatus(pod *corev1.Pod) map[string][]corev1.ResourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.assignments) == 0 {
		// Every pod's status write asks: most nodes hold no device.
		return nil
	}
	var out map[string][]corev1.ResourceStatus
	health := func(resource, id string) corev1.ResourceHealthStatus {
		ep := m.resources[resource]
		if ep == nil {
			return corev1.ResourceHealthStatusUnknown
		}
		return DeviceHealth(ep.client != nil, ep.listed, ep.devices, id)
	}
	for _, c := range pod.Spec.Containers {
		assigned := map[string][]string{}
		for k, a := range m.assignments {
			if k.pod == pod.UID && k.container == c.Name {
				assigned[k.resource] = a.DeviceIDs
			}
		}
		if st := ResourceStatus(assigned, health); st != nil {
			if out == nil {
				out = map[string][]corev1.ResourceStatus{}
			}
			out[c.Name] = st
		}
	}
	return out
}
