package csi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

func TestPlanCSINodeDrivers(t *testing.T) {
	other := storagev1.CSINodeDriver{Name: "other", NodeID: "o", TopologyKeys: []string{"zone"}}
	tests := []struct {
		name        string
		existing    []storagev1.CSINodeDriver
		want        map[string]DriverNodeInfo
		remove      []string
		out         []storagev1.CSINodeDriver
		wantChanged bool
	}{{
		name:        "nothing",
		existing:    nil,
		out:         []storagev1.CSINodeDriver{},
		wantChanged: false,
	}, {
		name:     "install into empty",
		existing: []storagev1.CSINodeDriver{},
		want:     map[string]DriverNodeInfo{"d": {NodeID: "n1", MaxVolumes: 3, Topology: map[string]string{"b": "2", "a": "1"}}},
		out: []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1", TopologyKeys: []string{"a", "b"},
			Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](3)}}},
		wantChanged: true,
	}, {
		name:        "install without limit or topology, others kept",
		existing:    []storagev1.CSINodeDriver{other},
		want:        map[string]DriverNodeInfo{"d": {NodeID: "n1"}},
		out:         []storagev1.CSINodeDriver{other, {Name: "d", NodeID: "n1", TopologyKeys: nil}},
		wantChanged: true,
	}, {
		name:        "already installed, as the API returns it",
		existing:    []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1", TopologyKeys: []string{"a"}, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](2)}}},
		want:        map[string]DriverNodeInfo{"d": {NodeID: "n1", MaxVolumes: 2, Topology: map[string]string{"a": "1"}}},
		out:         []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1", TopologyKeys: []string{"a"}, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](2)}}},
		wantChanged: false,
	}, {
		name:        "already installed",
		existing:    []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1", TopologyKeys: nil}, other},
		want:        map[string]DriverNodeInfo{"d": {NodeID: "n1"}},
		out:         []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1", TopologyKeys: nil}, other},
		wantChanged: false,
	}, {
		name:        "new node ID replaces the entry in place",
		existing:    []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1"}, other},
		want:        map[string]DriverNodeInfo{"d": {NodeID: "n2"}},
		out:         []storagev1.CSINodeDriver{{Name: "d", NodeID: "n2", TopologyKeys: nil}, other},
		wantChanged: true,
	}, {
		name:        "uninstall",
		existing:    []storagev1.CSINodeDriver{{Name: "d", NodeID: "n1"}, other},
		remove:      []string{"d"},
		out:         []storagev1.CSINodeDriver{other},
		wantChanged: true,
	}, {
		name:        "uninstall of an absent driver",
		existing:    []storagev1.CSINodeDriver{other},
		remove:      []string{"d"},
		out:         []storagev1.CSINodeDriver{other},
		wantChanged: false,
	}, {
		name:        "huge limit is capped",
		existing:    []storagev1.CSINodeDriver{},
		want:        map[string]DriverNodeInfo{"d": {NodeID: "n", MaxVolumes: 1 << 40}},
		out:         []storagev1.CSINodeDriver{{Name: "d", NodeID: "n", TopologyKeys: nil, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](1<<31 - 1)}}},
		wantChanged: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed := planCSINodeDrivers(tt.existing, tt.want, sets.New(tt.remove...))
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !equality.Semantic.DeepEqual(out, tt.out) {
				t.Errorf("drivers =\n%+v\nwant\n%+v", out, tt.out)
			}
		})
	}
}

func TestPlanNodePatch(t *testing.T) {
	node := func(annotation string, labels map[string]string) *corev1.Node {
		n := &corev1.Node{}
		n.Name = "n"
		n.Labels = labels
		if annotation != "" {
			n.Annotations = map[string]string{NodeIDAnnotation: annotation, "other": "x"}
		}
		return n
	}
	tests := []struct {
		name          string
		node          *corev1.Node
		want          map[string]DriverNodeInfo
		remove        []string
		before, after []storagev1.CSINodeDriver
		patch         string
	}{{
		name:  "nothing to do",
		node:  node("", map[string]string{"kubernetes.io/hostname": "n"}),
		patch: "",
	}, {
		name:  "install first driver",
		node:  node("", nil),
		want:  map[string]DriverNodeInfo{"d": {NodeID: "id1", Topology: map[string]string{"topology.d/zone": "z1"}}},
		patch: `{"metadata":{"annotations":{"csi.volume.kubernetes.io/nodeid":"{\"d\":\"id1\"}"},"labels":{"topology.d/zone":"z1"}}}`,
	}, {
		name:  "install next to another driver",
		node:  node(`{"e":"id9"}`, map[string]string{"topology.d/zone": "z1"}),
		want:  map[string]DriverNodeInfo{"d": {NodeID: "id1", Topology: map[string]string{"topology.d/zone": "z1"}}},
		patch: `{"metadata":{"annotations":{"csi.volume.kubernetes.io/nodeid":"{\"d\":\"id1\",\"e\":\"id9\"}"}}}`,
	}, {
		name:  "already there",
		node:  node(`{"d":"id1"}`, map[string]string{"topology.d/zone": "z1"}),
		want:  map[string]DriverNodeInfo{"d": {NodeID: "id1", Topology: map[string]string{"topology.d/zone": "z1"}}},
		patch: "",
	}, {
		name:   "uninstall last driver",
		node:   node(`{"d":"id1"}`, map[string]string{"topology.d/zone": "z1", "kubernetes.io/hostname": "n"}),
		remove: []string{"d"},
		before: []storagev1.CSINodeDriver{{Name: "d", TopologyKeys: []string{"topology.d/zone"}}},
		after:  []storagev1.CSINodeDriver{},
		patch:  `{"metadata":{"annotations":{"csi.volume.kubernetes.io/nodeid":null},"labels":{"topology.d/zone":null}}}`,
	}, {
		name:   "uninstall keeps labels another driver lists",
		node:   node(`{"d":"id1","e":"id2"}`, map[string]string{"topology.d/zone": "z1", "shared": "s"}),
		remove: []string{"d"},
		before: []storagev1.CSINodeDriver{{Name: "d", TopologyKeys: []string{"shared", "topology.d/zone"}}, {Name: "e", TopologyKeys: []string{"shared"}}},
		after:  []storagev1.CSINodeDriver{{Name: "e", TopologyKeys: []string{"shared"}}},
		patch:  `{"metadata":{"annotations":{"csi.volume.kubernetes.io/nodeid":"{\"e\":\"id2\"}"},"labels":{"topology.d/zone":null}}}`,
	}, {
		name:   "uninstall already done",
		node:   node(`{"e":"id2"}`, nil),
		remove: []string{"d"},
		patch:  "",
	}, {
		name:  "unreadable annotation is replaced",
		node:  node(`not json`, nil),
		want:  map[string]DriverNodeInfo{"d": {NodeID: "id1"}},
		patch: `{"metadata":{"annotations":{"csi.volume.kubernetes.io/nodeid":"{\"d\":\"id1\"}"}}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := planNodePatch(tt.node, tt.want, sets.New(tt.remove...), tt.before, tt.after)
			if err != nil {
				t.Fatal(err)
			}
			if string(patch) != tt.patch {
				t.Errorf("patch =\n%s\nwant\n%s", patch, tt.patch)
			}
		})
	}
}

func TestValidateTopology(t *testing.T) {
	tests := []struct {
		segments map[string]string
		bad      string
	}{
		{map[string]string{"topology.hostpath.csi/node": "n"}, ""},
		{map[string]string{"topology.kubernetes.io/zone": "z", "topology.kubernetes.io/region": "r"}, ""},
		{map[string]string{"zone": "z"}, ""},
		{map[string]string{"node-restriction.kubernetes.io/zone": "z"}, "node-restriction.kubernetes.io/zone"},
		{map[string]string{"example.k8s.io/rack": "r", "topology.kubernetes.io/zone": "z"}, "example.k8s.io/rack"},
	}
	for _, tt := range tests {
		err := validateTopology(tt.segments)
		if tt.bad == "" && err != nil {
			t.Errorf("validateTopology(%v) = %v", tt.segments, err)
		}
		if tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("validateTopology(%v) = %v, want an error naming %s", tt.segments, err, tt.bad)
		}
	}
}

func TestNewCSINode(t *testing.T) {
	n := &corev1.Node{}
	n.Name, n.UID = "n", "uid-1"
	c := newCSINode(n)
	if c.Name != "n" || len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != "uid-1" ||
		c.OwnerReferences[0].Kind != "Node" || c.OwnerReferences[0].APIVersion != "v1" {
		t.Errorf("CSINode meta = %+v", c.ObjectMeta)
	}
	if !strings.Contains(c.Annotations[corev1.MigratedPluginsAnnotationKey], "kubernetes.io/gce-pd") {
		t.Errorf("annotations = %v", c.Annotations)
	}
	if c.Spec.Drivers == nil || len(c.Spec.Drivers) != 0 {
		t.Errorf("drivers = %#v, want empty", c.Spec.Drivers)
	}
}

func TestPlanOwner(t *testing.T) {
	n := &corev1.Node{}
	n.Name, n.UID = "n", "new"
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n", UID: "new"}
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: "t", UID: "t1"}
	tests := []struct {
		name    string
		refs    []metav1.OwnerReference
		out     []metav1.OwnerReference
		changed bool
	}{
		{"owned", []metav1.OwnerReference{want}, []metav1.OwnerReference{want}, false},
		{"old node UID", []metav1.OwnerReference{other, {APIVersion: "v1", Kind: "Node", Name: "n", UID: "old"}}, []metav1.OwnerReference{other, want}, true},
		{"no owner", nil, []metav1.OwnerReference{want}, true},
		{"two node owners", []metav1.OwnerReference{want, want}, []metav1.OwnerReference{want}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed := planOwner(tt.refs, n)
			if changed != tt.changed || !equality.Semantic.DeepEqual(out, tt.out) {
				t.Errorf("planOwner = %+v, %v; want %+v, %v", out, changed, tt.out, tt.changed)
			}
		})
	}
}

func TestSplitCollisions(t *testing.T) {
	node := &corev1.Node{}
	node.Labels = map[string]string{"zone": "z1"}
	want := map[string]DriverNodeInfo{
		"a": {NodeID: "1", Topology: map[string]string{"zone": "z1", "rack": "r1"}},
		"b": {NodeID: "2", Topology: map[string]string{"zone": "z2"}},
		"c": {NodeID: "3", Topology: map[string]string{"rack": "r2"}},
		"d": {NodeID: "4"},
	}
	ok, err := splitCollisions(node, want)
	if got := sets.List(sets.KeySet(ok)); strings.Join(got, ",") != "a,d" {
		t.Errorf("kept %v, want a,d", got)
	}
	wantErr := `detected topology value collision: driver b reported "zone":"z2" but existing label is "zone":"z1"; ` +
		`driver c reported "rack":"r2" but existing label is "rack":"r1"`
	if err == nil || err.Error() != wantErr {
		t.Errorf("err = %v\nwant %s", err, wantErr)
	}
	if ok, err := splitCollisions(&corev1.Node{}, map[string]DriverNodeInfo{"a": want["a"]}); err != nil || len(ok) != 1 {
		t.Errorf("no labels: %v, %v", ok, err)
	}
}
