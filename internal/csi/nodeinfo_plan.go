package csi

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// NodeIDAnnotation is the Node annotation holding, as a JSON object, the
// node ID each registered CSI driver reported for this node.
const NodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// migratedPlugins are the in-tree volume plugins whose volumes the CSINode
// annotation says are handled by their CSI drivers on this node. nodelet
// has none of these plugins, so for each of them the CSI driver is the only
// way, as for a kubelet with every migration on.
var migratedPlugins = []string{
	"kubernetes.io/aws-ebs",
	"kubernetes.io/azure-disk",
	"kubernetes.io/azure-file",
	"kubernetes.io/cinder",
	"kubernetes.io/gce-pd",
	"kubernetes.io/portworx-volume",
	"kubernetes.io/vsphere-volume",
}

// DriverNodeInfo is what a driver's NodeGetInfo reported.
type DriverNodeInfo struct {
	// NodeID is the driver's ID of this node.
	NodeID string
	// MaxVolumes is the most volumes of the driver this node takes; 0 is
	// no limit.
	MaxVolumes int64
	// Topology are the segments of the node's accessible topology, which
	// become Node labels.
	Topology map[string]string
}

// validateTopology refuses topology segments the node may not set on itself
// as labels under the NodeRestriction admission plugin (keys in the
// kubernetes.io and k8s.io namespaces other than the kubelet's own), and
// keys that are no label keys.
func validateTopology(segments map[string]string) error {
	bad := nodeinfo.RestrictedLabels(segments)
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("topology keys %s are in the kubernetes.io or k8s.io namespaces and a node may not set them as labels on itself",
		strings.Join(bad, ", "))
}

// newCSINode is the node's CSINode as it is created: owned by the Node, with
// the migrated-plugins annotation and no drivers.
func newCSINode(node *corev1.Node) *storagev1.CSINode {
	c := &storagev1.CSINode{}
	c.Name = node.Name
	c.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       node.Name,
		UID:        node.UID,
	}}
	c.Annotations = map[string]string{corev1.MigratedPluginsAnnotationKey: strings.Join(migratedPlugins, ",")}
	c.Spec.Drivers = []storagev1.CSINodeDriver{}
	return c
}

// planOwner returns the CSINode's owner references with its Node owner
// pointing at node (a Node deleted and created again has a new UID; the
// garbage collector would otherwise delete the CSINode), and whether they
// changed.
func planOwner(refs []metav1.OwnerReference, node *corev1.Node) ([]metav1.OwnerReference, bool) {
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	found, changed := false, false
	for _, r := range refs {
		if r.APIVersion == "v1" && r.Kind == "Node" {
			if found {
				changed = true
				continue
			}
			found = true
			if r.Name != node.Name || r.UID != node.UID {
				r, changed = want, true
			}
		}
		out = append(out, r)
	}
	if !found {
		out, changed = append(out, want), true
	}
	return out, changed
}

// csiNodeDriver is the CSINode entry of a driver.
func csiNodeDriver(name string, info DriverNodeInfo) storagev1.CSINodeDriver {
	d := storagev1.CSINodeDriver{Name: name, NodeID: info.NodeID}
	if len(info.Topology) > 0 {
		// As the API returns it: no keys is no field.
		d.TopologyKeys = sets.List(sets.KeySet(info.Topology))
	}
	if info.MaxVolumes > 0 {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(min(info.MaxVolumes, int64(1<<31-1))))}
	}
	return d
}

// planCSINodeDrivers returns the driver list of the CSINode with the drivers
// of want installed (replacing entries of the same name) and those of
// remove dropped, other entries kept in their order; and whether it differs
// from existing.
func planCSINodeDrivers(existing []storagev1.CSINodeDriver, want map[string]DriverNodeInfo, remove sets.Set[string]) ([]storagev1.CSINodeDriver, bool) {
	out := make([]storagev1.CSINodeDriver, 0, len(existing)+len(want))
	seen := sets.New[string]()
	for _, d := range existing {
		if info, ok := want[d.Name]; ok {
			out = append(out, csiNodeDriver(d.Name, info))
			seen.Insert(d.Name)
			continue
		}
		if remove.Has(d.Name) {
			continue
		}
		out = append(out, d)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if !seen.Has(name) {
			out = append(out, csiNodeDriver(name, want[name]))
		}
	}
	return out, !equality.Semantic.DeepEqual(normalize(existing), out)
}

func normalize(d []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
	if d == nil {
		return []storagev1.CSINodeDriver{}
	}
	return d
}

// splitCollisions returns the drivers of want whose topology agrees with the
// Node's labels and with the drivers before them (by name), and an error
// naming the others, which the kubelet refuses too.
func splitCollisions(node *corev1.Node, want map[string]DriverNodeInfo) (map[string]DriverNodeInfo, error) {
	ok := make(map[string]DriverNodeInfo, len(want))
	labels := maps.Clone(node.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	var collisions []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		info := want[name]
		var bad []string
		for _, k := range slices.Sorted(maps.Keys(info.Topology)) {
			v := info.Topology[k]
			if cur, exists := labels[k]; exists && cur != v {
				bad = append(bad, fmt.Sprintf("driver %s reported %q:%q but existing label is %q:%q", name, k, v, k, cur))
			}
		}
		if len(bad) > 0 {
			collisions = append(collisions, bad...)
			continue
		}
		maps.Copy(labels, info.Topology)
		ok[name] = info
	}
	if len(collisions) > 0 {
		return ok, fmt.Errorf("detected topology value collision: %s", strings.Join(collisions, "; "))
	}
	return ok, nil
}

// planNodePatch returns the metadata patch of the Node (a merge patch of
// the node ID annotation and the topology labels only; nil when nothing
// changes): the node IDs of want set and those of remove dropped (the
// annotation removed when empty); the topology segments of want set as
// labels; and labels of the keys of the removed drivers' entries in before
// removed unless a driver entry in after still lists them. A segment whose
// label exists with another value is an error, as with the kubelet.
func planNodePatch(node *corev1.Node, want map[string]DriverNodeInfo, remove sets.Set[string], before, after []storagev1.CSINodeDriver) ([]byte, error) {
	ids := map[string]string{}
	if raw, ok := node.Annotations[NodeIDAnnotation]; ok && raw != "" {
		// An unreadable value is replaced, as the kubelet does.
		_ = json.Unmarshal([]byte(raw), &ids)
	}
	for name := range remove {
		if _, ok := want[name]; !ok {
			delete(ids, name)
		}
	}
	for name, info := range want {
		ids[name] = info.NodeID
	}
	annotations := map[string]any{}
	if len(ids) == 0 {
		if _, ok := node.Annotations[NodeIDAnnotation]; ok {
			annotations[NodeIDAnnotation] = nil
		}
	} else {
		raw, err := json.Marshal(ids)
		if err != nil {
			return nil, fmt.Errorf("encoding the %s annotation: %w", NodeIDAnnotation, err)
		}
		if node.Annotations[NodeIDAnnotation] != string(raw) {
			annotations[NodeIDAnnotation] = string(raw)
		}
	}

	labels := map[string]any{}
	for _, info := range want {
		for k, v := range info.Topology {
			if _, ok := node.Labels[k]; !ok {
				labels[k] = v
			}
		}
	}
	kept := sets.New[string]()
	for _, d := range after {
		kept.Insert(d.TopologyKeys...)
	}
	for _, d := range before {
		if !remove.Has(d.Name) {
			continue
		}
		if _, ok := want[d.Name]; ok {
			continue
		}
		for _, k := range d.TopologyKeys {
			if _, ok := node.Labels[k]; ok && !kept.Has(k) {
				labels[k] = nil
			}
		}
	}

	if len(annotations) == 0 && len(labels) == 0 {
		return nil, nil
	}
	meta := map[string]any{}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, fmt.Errorf("encoding the node patch: %w", err)
	}
	return patch, nil
}
