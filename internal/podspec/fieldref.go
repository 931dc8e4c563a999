package podspec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PodFieldValue is the downward API value of one field of the pod:
// metadata.name, namespace, uid, labels['k'] and annotations['k'],
// spec.nodeName and serviceAccountName, and status.podIP(s) and hostIP(s)
// from the given addresses.
func PodFieldValue(pod *v1.Pod, path string, podIPs, hostIPs []string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return first(podIPs), nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	case "status.hostIP":
		return first(hostIPs), nil
	case "status.hostIPs":
		return strings.Join(hostIPs, ","), nil
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// subscript parses "<prefix>['<key>']" and validates key as a label or
// annotation key.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	key, ok := strings.CutSuffix(rest, "']")
	if !ok || len(validation.IsQualifiedName(key)) > 0 {
		return "", false
	}
	return key, true
}

// ResourceFieldValue is the downward API value of a container resource
// ("limits.memory", "requests.cpu", ...): the quantity divided by divisor
// and rounded up. A limit of cpu, memory or ephemeral-storage the container
// does not set is the node's allocatable amount.
func ResourceFieldValue(c *v1.Container, res string, divisor resource.Quantity, allocatable v1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(res, ".")
	var q resource.Quantity
	switch {
	case ok && kind == "limits":
		q = effectiveLimit(c, v1.ResourceName(name), allocatable)
	case ok && kind == "requests":
		q = c.Resources.Requests[v1.ResourceName(name)]
	default:
		return "", fmt.Errorf("unsupported container resource %q", res)
	}
	return divideRoundUp(q, divisor, v1.ResourceName(name) == v1.ResourceCPU), nil
}

// effectiveLimit is a container's limit of a resource, defaulting to the
// node's allocatable amount for cpu, memory and ephemeral storage.
func effectiveLimit(c *v1.Container, name v1.ResourceName, allocatable v1.ResourceList) resource.Quantity {
	if q, ok := c.Resources.Limits[name]; ok && !q.IsZero() {
		return q
	}
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return allocatable[name]
	}
	return resource.Quantity{}
}

// divideRoundUp divides q by divisor (1 when zero), rounding up; cpu is
// divided in millicores so that divisor 1m yields millicores.
func divideRoundUp(q, divisor resource.Quantity, cpu bool) string {
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	a, b := q.Value(), divisor.Value()
	if cpu {
		a, b = q.MilliValue(), divisor.MilliValue()
	}
	if b <= 0 {
		return "0"
	}
	n := a / b
	if a%b != 0 && a > 0 {
		n++
	}
	return fmt.Sprint(n)
}
