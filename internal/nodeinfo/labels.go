package nodeinfo

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// Labels are the labels nodelet owns on its Node: the configured nodeLabels
// and the well-known hostname, os and arch labels, which win over a
// configured label of the same key. The hostname label is the node name:
// nodelet's node name plays the part of the kubelet's --hostname-override.
func Labels(nodeName string, nodeLabels map[string]string) map[string]string {
	out := make(map[string]string, len(nodeLabels)+3)
	for k, v := range nodeLabels {
		out[k] = v
	}
	out[corev1.LabelHostname] = nodeName
	out[corev1.LabelOSStable] = runtime.GOOS
	out[corev1.LabelArchStable] = runtime.GOARCH
	return out
}

// RestrictedLabels returns, sorted, the keys of labels that a node may not
// set on itself under the NodeRestriction admission plugin: any key in the
// kubernetes.io or k8s.io namespaces that is not one of the kubelet's own
// labels or namespaces (node-restriction.kubernetes.io/ is never allowed).
func RestrictedLabels(labels map[string]string) []string {
	var bad []string
	for k := range labels {
		ns, _, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		restricted := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") ||
			ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
		if restricted && !kubeletapis.IsKubeletLabel(k) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	return bad
}

// ValidateNodeLabels rejects labels a node may not set on itself (see
// RestrictedLabels).
func ValidateNodeLabels(labels map[string]string) error {
	bad := RestrictedLabels(labels)
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("nodeLabels %s are in the kubernetes.io or k8s.io namespaces and a node may not set them on itself (allowed: %s, and keys under %s)",
		strings.Join(bad, ", "), strings.Join(kubeletapis.KubeletLabels(), ", "), strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "))
}
