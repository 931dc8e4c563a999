package deviceplugin

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// IsExtendedResource says whether name is an extended resource a device
// plugin may advertise: a qualified name outside the kubernetes.io domains,
// and not a quota's requests.* name.
func IsExtendedResource(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") || strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}

// ValidateRegistration checks a plugin's registration request: the API
// version nodelet speaks, an extended resource name, and an endpoint that
// names a socket file in the device plugins directory.
func ValidateRegistration(req *pluginapi.RegisterRequest) error {
	if req.GetVersion() != pluginapi.Version {
		return fmt.Errorf("unsupported device plugin API version %q, nodelet supports %q", req.GetVersion(), pluginapi.Version)
	}
	if !IsExtendedResource(req.GetResourceName()) {
		return fmt.Errorf("invalid resource name %q: not an extended resource name", req.GetResourceName())
	}
	ep := req.GetEndpoint()
	if ep == "" || ep == "." || ep == ".." || strings.ContainsRune(ep, '/') || ep == SocketName {
		return fmt.Errorf("invalid endpoint %q: must name a socket file in the device plugins directory", ep)
	}
	return nil
}

// Counts are a resource's devices as the Node reports them: Capacity counts
// every device, healthy or not (as the kubelet), Allocatable the healthy ones.
type Counts struct {
	Capacity, Allocatable int64
}

// CountDevices counts devices by health.
func CountDevices(devices map[string]bool) Counts {
	var c Counts
	for _, healthy := range devices {
		c.Capacity++
		if healthy {
			c.Allocatable++
		}
	}
	return c
}

// ResourceLists turns per-resource counts into the Node's capacity and
// allocatable entries.
func ResourceLists(counts map[string]Counts) (capacity, allocatable corev1.ResourceList) {
	capacity, allocatable = corev1.ResourceList{}, corev1.ResourceList{}
	for name, c := range counts {
		capacity[corev1.ResourceName(name)] = *resource.NewQuantity(c.Capacity, resource.DecimalSI)
		allocatable[corev1.ResourceName(name)] = *resource.NewQuantity(c.Allocatable, resource.DecimalSI)
	}
	return capacity, allocatable
}

// Available lists the healthy devices no live container holds, sorted.
func Available(devices map[string]bool, inUse map[string]bool) []string {
	var out []string
	for id, healthy := range devices {
		if healthy && !inUse[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// PickDevices chooses n devices for a container: first those of reusable
// (devices the pod's init containers held, which a later container may take
// over), then the plugin's preferred ones, then the available ones in order.
// Only devices in reusable or available are ever picked.
func PickDevices(resourceName string, n int, reusable, available, preferred []string) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	if total := len(reusable) + len(available); total < n {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", resourceName, n, total)
	}
	ok := map[string]bool{}
	for _, id := range available {
		ok[id] = true
	}
	picked := make([]string, 0, n)
	taken := map[string]bool{}
	take := func(id string, allowed bool) {
		if len(picked) < n && allowed && !taken[id] {
			taken[id] = true
			picked = append(picked, id)
		}
	}
	for _, id := range reusable {
		take(id, true)
	}
	for _, id := range preferred {
		take(id, ok[id])
	}
	for _, id := range available {
		take(id, true)
	}
	return picked, nil
}

// Need is how many devices of each plugin resource a container asks for
// (its limits: extended resources cannot be overcommitted), among the
// resources known says are served by plugins.
func Need(c *corev1.Container, known func(string) bool) map[string]int {
	var out map[string]int
	for name, q := range c.Resources.Limits {
		if n := q.Value(); n > 0 && known(string(name)) {
			if out == nil {
				out = map[string]int{}
			}
			out[string(name)] = int(n)
		}
	}
	return out
}
