package volume

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// downwardAPIPayload writes each item's field or resource value.
func (m *Manager) downwardAPIPayload(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, defaultMode fs.FileMode) (payload, error) {
	p := payload{}
	for _, item := range items {
		value, err := m.downwardValue(pod, &item)
		if err != nil {
			return nil, fmt.Errorf("downward API item %q: %w", item.Path, err)
		}
		mode := defaultMode
		if item.Mode != nil {
			mode = modeOrDefault(item.Mode)
		}
		p[item.Path] = file{data: []byte(value), mode: mode}
	}
	return p, nil
}

func (m *Manager) downwardValue(pod *v1.Pod, item *v1.DownwardAPIVolumeFile) (string, error) {
	switch {
	case item.FieldRef != nil:
		return fieldValue(pod, item.FieldRef.FieldPath)
	case item.ResourceFieldRef != nil:
		return m.resourceValue(pod, item.ResourceFieldRef)
	default:
		return "", fmt.Errorf("neither fieldRef nor resourceFieldRef is set")
	}
}

// fieldValue returns the value of a pod field that a downward API volume may
// expose: metadata.name, namespace, uid, labels and annotations (whole, as
// sorted key="value" lines, or one key with the ['key'] subscript).
func fieldValue(pod *v1.Pod, path string) (string, error) {
	switch {
	case path == "metadata.labels":
		return formatMap(pod.Labels), nil
	case path == "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case strings.HasPrefix(path, "metadata."):
		v, err := podspec.PodFieldValue(pod, path, nil, nil)
		if err != nil {
			return "", fmt.Errorf("field path %q is not supported in a volume", path)
		}
		return v, nil
	}
	return "", fmt.Errorf("field path %q is not supported in a volume", path)
}

// formatMap renders a map as the kubelet does: one key="value" line per
// entry, sorted by key, values quoted as Go strings, no final newline.
func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceValue returns a container's resource request or limit divided by
// the divisor and rounded up. A limit the container does not set is the
// node's allocatable amount.
func (m *Manager) resourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	c := podspec.ContainerSpec(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %q not found in pod", ref.ContainerName)
	}
	var alloc v1.ResourceList
	if kind, name, _ := strings.Cut(ref.Resource, "."); kind == "limits" {
		if _, set := c.Resources.Limits[v1.ResourceName(name)]; !set {
			if m.nodeAllocatable == nil {
				return "", fmt.Errorf("container %q sets no %s limit and the node's allocatable resources are unknown", c.Name, name)
			}
			var err error
			if alloc, err = m.nodeAllocatable(); err != nil {
				return "", fmt.Errorf("getting node allocatable resources: %w", err)
			}
		}
	}
	return podspec.ResourceFieldValue(c, ref.Resource, ref.Divisor, alloc)
}
