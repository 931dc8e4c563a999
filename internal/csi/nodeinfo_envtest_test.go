package csi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

// apiServerRecoveryTimeout bounds the writes reaching an API server that
// was down: the writer's back-off is capped at 30s.
const apiServerRecoveryTimeout = 45 * time.Second

// TestNodeInfoAgainstAPIServer registers and deregisters a driver with the
// API writes done as the node's own identity, under the Node authorizer and
// NodeRestriction.
func TestNodeInfoAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	ctx := context.Background()
	const nodeName = "csi-node"
	api, admin, asNode := startAPIServerAsNode(t, nodeName)

	// Started before the Node exists, as at a first boot.
	ni := NewNodeInfo(nodeName, asNode, asNode)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ni.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node info: %v", err)
		}
	})
	time.Sleep(200 * time.Millisecond)
	if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, &storagev1.CSINode{}); !apierrors.IsNotFound(err) {
		t.Fatalf("CSINode before the Node exists: %v", err)
	}

	node := &corev1.Node{}
	node.Name = nodeName
	node.Labels = map[string]string{"kubernetes.io/hostname": nodeName}
	node.Annotations = map[string]string{"someone.else/annotation": "kept"}
	if err := asNode.Create(ctx, node); err != nil {
		t.Fatal(err)
	}

	csiNode := &storagev1.CSINode{}
	eventually(t, "the empty CSINode", func() bool {
		return admin.Get(ctx, types.NamespacedName{Name: nodeName}, csiNode) == nil
	})
	if len(csiNode.OwnerReferences) != 1 || csiNode.OwnerReferences[0].UID != node.UID || csiNode.OwnerReferences[0].Kind != "Node" {
		t.Errorf("CSINode owner references = %+v", csiNode.OwnerReferences)
	}
	if csiNode.Annotations[corev1.MigratedPluginsAnnotationKey] == "" {
		t.Errorf("CSINode annotations = %v", csiNode.Annotations)
	}
	if len(csiNode.Spec.Drivers) != 0 {
		t.Errorf("CSINode drivers = %+v", csiNode.Spec.Drivers)
	}

	// A driver registers through the plugin watcher.
	base := shortTempDir(t)
	dir := filepath.Join(base, PluginsRegistryDir)
	drv := startCSINodeFake(t, base, nodeInfoResponse())
	reg := NewRegistry()
	t.Cleanup(reg.Close)
	w := NewWatcher(WatcherOptions{Dir: dir, Registry: reg, Installer: ni, RetryPeriod: 100 * time.Millisecond})
	wdone := make(chan error, 1)
	go func() { wdone <- w.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-wdone; err != nil {
			t.Errorf("watcher: %v", err)
		}
	})
	eventually(t, "the registry directory", func() bool { _, err := os.Stat(dir); return err == nil })
	r := startRegistrar(t, filepath.Join(dir, "reg.sock"), csiInfo(regTestDriver, drv.endpoint, "1.0.0"))
	if s := r.nextStatus(t); !s.PluginRegistered {
		t.Fatalf("status = %+v", s)
	}

	eventually(t, "the driver in the CSINode", func() bool {
		c := &storagev1.CSINode{}
		if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, c); err != nil || len(c.Spec.Drivers) != 1 {
			return false
		}
		d := c.Spec.Drivers[0]
		return d.Name == regTestDriver && d.NodeID == "node-1" && len(d.TopologyKeys) == 1 &&
			d.TopologyKeys[0] == "topology.hostpath.csi/node" && d.Allocatable != nil && *d.Allocatable.Count == 7
	})
	eventually(t, "the node ID annotation and the topology label", func() bool {
		n := &corev1.Node{}
		if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, n); err != nil {
			return false
		}
		ids := map[string]string{}
		_ = json.Unmarshal([]byte(n.Annotations[NodeIDAnnotation]), &ids)
		return ids[regTestDriver] == "node-1" && n.Labels["topology.hostpath.csi/node"] == "node-1" &&
			n.Labels["kubernetes.io/hostname"] == nodeName && n.Annotations["someone.else/annotation"] == "kept"
	})

	// The registrar goes away: the driver's entries go too.
	r.stop(t)
	eventually(t, "the driver out of the CSINode", func() bool {
		c := &storagev1.CSINode{}
		return admin.Get(ctx, types.NamespacedName{Name: nodeName}, c) == nil && len(c.Spec.Drivers) == 0
	})
	eventually(t, "the annotation and label removed", func() bool {
		n := &corev1.Node{}
		if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, n); err != nil {
			return false
		}
		_, ann := n.Annotations[NodeIDAnnotation]
		_, label := n.Labels["topology.hostpath.csi/node"]
		return !ann && !label && n.Labels["kubernetes.io/hostname"] == nodeName && n.Annotations["someone.else/annotation"] == "kept"
	})

	// A driver registering while the API server is down is usable at once,
	// and its entries are written once the API server is back.
	drv2 := startCSINodeFake(t, shortTempDir(t), &csipb.NodeGetInfoResponse{NodeId: "node-2"})
	var r2 *fakeRegistrar
	if err := api.Restart(func() {
		r2 = startRegistrar(t, filepath.Join(dir, "reg2.sock"), csiInfo("second.csi.example.com", drv2.endpoint, "1.0.0"))
		if s := r2.nextStatus(t); !s.PluginRegistered {
			t.Errorf("status while the API server is down = %+v", s)
		}
		if _, err := reg.NodeClient(ctx, "second.csi.example.com"); err != nil {
			t.Errorf("driver registered while the API server is down: %v", err)
		}
		time.Sleep(2 * time.Second) // a failed write or two
	}); err != nil {
		t.Fatal(err)
	}
	// The writer's back-off is below apiServerRecoveryTimeout.
	eventuallyWithin(t, apiServerRecoveryTimeout, "the second driver in the CSINode", func() bool {
		c := &storagev1.CSINode{}
		return admin.Get(ctx, types.NamespacedName{Name: nodeName}, c) == nil &&
			len(c.Spec.Drivers) == 1 && c.Spec.Drivers[0].NodeID == "node-2"
	})

	// A deleted CSINode comes back at the next sync.
	if err := admin.Delete(ctx, &storagev1.CSINode{ObjectMeta: csiNode.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	if err := ni.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, &storagev1.CSINode{}); err != nil {
		t.Errorf("CSINode after a sync: %v", err)
	}

	// A Node created again: the CSINode follows its new UID.
	if err := admin.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	node = &corev1.Node{}
	node.Name = nodeName
	if err := asNode.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := ni.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	c := &storagev1.CSINode{}
	if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, c); err != nil {
		t.Fatal(err)
	}
	if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != node.UID {
		t.Errorf("CSINode owners after the Node was created again = %+v, want UID %s", c.OwnerReferences, node.UID)
	}
	if len(c.Spec.Drivers) != 1 || c.Spec.Drivers[0].Name != "second.csi.example.com" {
		t.Errorf("CSINode drivers after the Node was created again = %+v", c.Spec.Drivers)
	}
	if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		t.Fatal(err)
	}
	if got := node.Annotations[NodeIDAnnotation]; got != `{"second.csi.example.com":"node-2"}` {
		t.Errorf("node ID annotation of the Node created again = %q", got)
	}
}

// startAPIServerAsNode starts kube-apiserver and etcd for t and returns
// them with an admin client and a client with nodeName's own identity,
// under the Node authorizer and NodeRestriction.
func startAPIServerAsNode(t *testing.T, nodeName string) (api *utils.APIServer, admin, asNode client.Client) {
	t.Helper()
	api, err := utils.StartAPIServer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Stop() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if admin, err = client.New(api.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	nodeCfg, err := api.NodeUserConfig(nodeName)
	if err != nil {
		t.Fatal(err)
	}
	if asNode, err = client.New(nodeCfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return api, admin, asNode
}
