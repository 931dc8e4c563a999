package dra

import (
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DeviceHealthFunc returns a driver's device's health and message as
// read now.
type DeviceHealthFunc func(driver string, device DeviceKey) (v1.ResourceHealthStatus, string)

// ResourceID is a prepared DRA device's ID in a pod's
// allocatedResourcesStatus, as the kubelet writes it: the device's first
// CDI device ID, or <driver>/<pool>/<device> when it has none.
func ResourceID(driver string, dev Device) v1.ResourceID {
	if len(dev.CDIDeviceIDs) > 0 {
		return v1.ResourceID(dev.CDIDeviceIDs[0])
	}
	return v1.ResourceID(driver + "/" + dev.Pool + "/" + dev.Device)
}

// claimUse is one claim (or one request of it) a container uses, and the
// name of its allocatedResourcesStatus entry.
type claimUse struct {
	entry   v1.ResourceName
	claim   string
	request string
}

// containerClaimUses returns what container c of pod uses of claims, in
// its spec's order: each of its resources.claims, as
// claim:<pod claim name>[/<request>], and, when extendedResources is on,
// each request the scheduler mapped to one of its DRA-backed extended
// resources, as claim:<claim name>/<request>. A claim a template has not
// made (or made none for) is left out.
func containerClaimUses(pod *v1.Pod, c *v1.Container, extendedResources bool) []claimUse {
	var out []claimUse
	for _, rc := range c.Resources.Claims {
		i := slices.IndexFunc(pod.Spec.ResourceClaims, func(pc v1.PodResourceClaim) bool { return pc.Name == rc.Name })
		if i < 0 {
			continue
		}
		name, err := claimName(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == "" {
			continue
		}
		entry := "claim:" + rc.Name
		if rc.Request != "" {
			entry += "/" + rc.Request
		}
		out = append(out, claimUse{entry: v1.ResourceName(entry), claim: name, request: rc.Request})
	}
	if st := pod.Status.ExtendedResourceClaimStatus; extendedResources && st != nil && st.ResourceClaimName != "" {
		for _, m := range st.RequestMappings {
			q, ok := c.Resources.Requests[v1.ResourceName(m.ResourceName)]
			if m.ContainerName != c.Name || !ok || q.IsZero() {
				continue
			}
			out = append(out, claimUse{
				entry:   v1.ResourceName("claim:" + st.ResourceClaimName + "/" + m.RequestName),
				claim:   st.ResourceClaimName,
				request: m.RequestName,
			})
		}
	}
	return out
}

// forRequest says whether a prepared device serves a claim's request (""
// for the whole claim): it names no request, or the request's base
// request (a subrequest "<request>/<sub>" of a firstAvailable request
// counts as its request).
func forRequest(dev Device, request string) bool {
	if request == "" || len(dev.RequestNames) == 0 {
		return true
	}
	base := baseRequest(request)
	return slices.ContainsFunc(dev.RequestNames, func(n string) bool { return baseRequest(n) == base })
}

func baseRequest(name string) string {
	base, _, _ := strings.Cut(name, "/")
	return base
}

// ContainerResourceStatus returns the allocatedResourcesStatus entries of
// container c of pod, as the kubelet reports them with ResourceHealthStatus
// on: one per claim (or request of one) the container uses that is
// prepared for the pod (prepared, by claim name), listing each device its
// drivers prepared for it (ResourceID) with its health,
// and its message when messages is on (the ResourceHealthStatusMessage
// gate) and the driver gave one. Entries are sorted by name and devices by
// ID, so that equal states make equal statuses; an entry without devices
// is left out, and nil means none.
func ContainerResourceStatus(pod *v1.Pod, c *v1.Container, prepared map[string]ClaimState, health DeviceHealthFunc, messages, extendedResources bool) []v1.ResourceStatus {
	entries := map[v1.ResourceName]map[v1.ResourceID]v1.ResourceHealth{}
	for _, use := range containerClaimUses(pod, c, extendedResources) {
		st, ok := prepared[use.claim]
		if !ok {
			continue
		}
		for _, d := range st.Drivers {
			for _, dev := range d.Devices {
				if !forRequest(dev, use.request) {
					continue
				}
				key := DeviceKey{Pool: dev.Pool, Device: dev.Device}
				rh := v1.ResourceHealth{ResourceID: ResourceID(d.Name, dev), Health: v1.ResourceHealthStatusUnknown}
				if health != nil {
					h, msg := health(d.Name, key)
					rh.Health = h
					if messages && msg != "" {
						rh.Message = &msg
					}
				}
				if entries[use.entry] == nil {
					entries[use.entry] = map[v1.ResourceID]v1.ResourceHealth{}
				}
				entries[use.entry][rh.ResourceID] = rh
			}
		}
	}
	if len(entries) == 0 {
		return nil
	}
	out := make([]v1.ResourceStatus, 0, len(entries))
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		rs := v1.ResourceStatus{Name: name}
		for _, id := range slices.Sorted(maps.Keys(entries[name])) {
			rs.Resources = append(rs.Resources, entries[name][id])
		}
		out = append(out, rs)
	}
	return out
}

// ResourceStatus returns, by container name, the allocatedResourcesStatus
// entries of pod's containers from the claims prepared for it and their
// devices' health (see ContainerResourceStatus); init containers get
// none, as from the kubelet. Without Options.Health it returns nil.
func (m *Manager) ResourceStatus(pod *v1.Pod) map[string][]v1.ResourceStatus {
	if m.opts.Health == nil {
		return nil
	}
	prepared := m.preparedFor(pod)
	if len(prepared) == 0 {
		return nil
	}
	var out map[string][]v1.ResourceStatus
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if st := ContainerResourceStatus(pod, c, prepared, m.opts.Health.Device, m.opts.HealthMessages, m.opts.ExtendedResources); st != nil {
			if out == nil {
				out = map[string][]v1.ResourceStatus{}
			}
			out[c.Name] = st
		}
	}
	return out
}

// preparedFor returns copies of the claims prepared for the pod, by name.
func (m *Manager) preparedFor(pod *v1.Pod) map[string]ClaimState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]ClaimState{}
	for _, st := range m.claims {
		if st.Namespace != pod.Namespace || !st.Prepared || !slices.Contains(st.PodUIDs, pod.UID) {
			continue
		}
		cp := *st
		cp.Drivers = slices.Clone(st.Drivers)
		out[st.Name] = cp
	}
	return out
}

// PodsUsing returns the pods that use a claim the node holds with one of
// the driver's devices, sorted: the pods whose status a change of those
// devices' health changes.
func (m *Manager) PodsUsing(driver string, devices []DeviceKey) []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.UID
	for _, st := range m.claims {
		if claimHasDevice(st, driver, devices) {
			out = append(out, st.PodUIDs...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func claimHasDevice(st *ClaimState, driver string, devices []DeviceKey) bool {
	for _, d := range st.Drivers {
		if d.Name != driver {
			continue
		}
		for _, dev := range d.Devices {
			if slices.Contains(devices, DeviceKey{Pool: dev.Pool, Device: dev.Device}) {
				return true
			}
		}
	}
	return false
}
