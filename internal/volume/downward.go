package volume

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	if base, key, ok := splitSubscript(path); ok {
		switch base {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		default:
			return "", fmt.Errorf("field path %q does not support a subscript", path)
		}
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	default:
		return "", fmt.Errorf("field path %q is not supported in a volume", path)
	}
}

// splitSubscript splits "metadata.labels['key']" into its path and key.
func splitSubscript(path string) (base, key string, ok bool) {
	rest, found := strings.CutSuffix(path, "']")
	if !found {
		return "", "", false
	}
	base, key, found = strings.Cut(rest, "['")
	return base, key, found && base != ""
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
	c := findContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %q not found in pod", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	q, err := m.containerResource(c, kind, v1.ResourceName(name))
	if err != nil {
		return "", err
	}
	return divideRoundingUp(q, ref.Divisor, v1.ResourceName(name) == v1.ResourceCPU), nil
}

func (m *Manager) containerResource(c *v1.Container, kind string, name v1.ResourceName) (resource.Quantity, error) {
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	if q, ok := list[name]; ok || kind == "requests" {
		return q, nil
	}
	if m.nodeAllocatable == nil {
		return resource.Quantity{}, fmt.Errorf("container %q sets no %s limit and the node's allocatable resources are unknown", c.Name, name)
	}
	alloc, err := m.nodeAllocatable()
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("getting node allocatable resources: %w", err)
	}
	return alloc[name], nil
}

// divideRoundingUp divides q by divisor (1 when unset) and rounds up; CPU is
// divided in millicores so that divisors such as 1m work.
func divideRoundingUp(q, divisor resource.Quantity, cpu bool) string {
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	num, den := q.Value(), divisor.Value()
	if cpu {
		num, den = q.MilliValue(), divisor.MilliValue()
	}
	if den <= 0 {
		den = 1
	}
	return strconv.FormatInt(ceilDiv(num, den), 10)
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) == (b > 0) {
		q++
	}
	return q
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
