package csi

import (
	"context"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestAllocatableRefreshAgainstAPIServer refreshes a driver's allocatable
// count in the CSINode every nodeAllocatableUpdatePeriodSeconds and at once
// on ResourceExhausted, reading the CSIDriver and writing the CSINode as the
// node's own identity under the Node authorizer and NodeRestriction.
func TestAllocatableRefreshAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	ctx := context.Background()
	const nodeName = "csi-alloc-node"
	_, admin, asNode := startAPIServerAsNode(t, nodeName)
	node := &corev1.Node{}
	node.Name = nodeName
	if err := asNode.Create(ctx, node); err != nil {
		t.Fatal(err)
	}

	// The driver registered, and its first answer written.
	drv := startCSINodeFake(t, shortTempDir(t), &csipb.NodeGetInfoResponse{NodeId: "n1", MaxVolumesPerNode: 7})
	reg := NewRegistry()
	t.Cleanup(reg.Close)
	if err := reg.add(RegisteredDriver{Name: regTestDriver, Endpoint: drv.endpoint, Versions: []string{"1.0.0"}}, utilversion.MustParseGeneric("1.0.0")); err != nil {
		t.Fatal(err)
	}
	ni := NewNodeInfo(nodeName, asNode, asNode)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := NewAllocatableRefresher(AllocatableOptions{
		Registry:  reg,
		Installer: ni,
		CSIDriver: func(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
			d := &storagev1.CSIDriver{}
			return d, asNode.Get(ctx, types.NamespacedName{Name: name}, d)
		},
		Clock: clk,
	})
	Installers{ni, r}.InstallDriver(regTestDriver, DriverNodeInfo{NodeID: "n1", MaxVolumes: 7})
	count := func() int32 {
		t.Helper()
		if err := ni.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		c := &storagev1.CSINode{}
		if err := admin.Get(ctx, types.NamespacedName{Name: nodeName}, c); err != nil {
			t.Fatal(err)
		}
		if len(c.Spec.Drivers) != 1 || c.Spec.Drivers[0].Allocatable == nil || c.Spec.Drivers[0].Allocatable.Count == nil {
			t.Fatalf("CSINode drivers %+v", c.Spec.Drivers)
		}
		return *c.Spec.Drivers[0].Allocatable.Count
	}
	reconcile := func() time.Duration {
		t.Helper()
		after, err := r.Reconcile(ctx, regTestDriver)
		if err != nil {
			t.Fatal(err)
		}
		return after
	}
	setInfo := func(max int64) {
		drv.mu.Lock()
		drv.info = &csipb.NodeGetInfoResponse{NodeId: "n1", MaxVolumesPerNode: max}
		drv.mu.Unlock()
	}
	if got := count(); got != 7 {
		t.Fatalf("allocatable count after registration = %d, want 7", got)
	}
	calls := drv.calls()

	// Without a CSIDriver, or one without a period: never asked again.
	setInfo(5)
	clk.Step(time.Hour)
	r.ResourceExhausted(regTestDriver)
	if after := reconcile(); after != 0 || drv.calls() != calls {
		t.Errorf("without a CSIDriver: requeue after %v, NodeGetInfo calls %d, want none", after, drv.calls()-calls)
	}
	csiDriver := &storagev1.CSIDriver{}
	csiDriver.Name = regTestDriver
	csiDriver.Spec.AttachRequired = ptr.To(true)
	csiDriver.Spec.PodInfoOnMount = ptr.To(false)
	if err := admin.Create(ctx, csiDriver); err != nil {
		t.Fatal(err)
	}
	if after := reconcile(); after != 0 || drv.calls() != calls {
		t.Errorf("without a period: requeue after %v, NodeGetInfo calls %d, want none", after, drv.calls()-calls)
	}

	// A period of 10s: the first refresh is one period after the driver
	// was last asked.
	csiDriver.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To[int64](10)
	if err := admin.Update(ctx, csiDriver); err != nil {
		t.Fatal(err)
	}
	if after := reconcile(); after != 10*time.Second || drv.calls() != calls {
		t.Errorf("period set: requeue after %v, NodeGetInfo calls %d; want 10s, none", after, drv.calls()-calls)
	}
	clk.Step(4 * time.Second)
	if after := reconcile(); after != 6*time.Second || drv.calls() != calls {
		t.Errorf("before the period: requeue after %v, NodeGetInfo calls %d; want 6s, none", after, drv.calls()-calls)
	}
	clk.Step(6 * time.Second)
	if after := reconcile(); after != 10*time.Second || drv.calls() != calls+1 {
		t.Errorf("after the period: requeue after %v, NodeGetInfo calls %d; want 10s, 1", after, drv.calls()-calls)
	}
	if got := count(); got != 5 {
		t.Errorf("allocatable count after the period = %d, want 5", got)
	}

	// ResourceExhausted: at once.
	setInfo(2)
	clk.Step(time.Second)
	r.ResourceExhausted(regTestDriver)
	if after := reconcile(); after != 10*time.Second || drv.calls() != calls+2 {
		t.Errorf("exhausted: requeue after %v, NodeGetInfo calls %d; want 10s, 2", after, drv.calls()-calls)
	}
	if got := count(); got != 2 {
		t.Errorf("allocatable count after ResourceExhausted = %d, want 2", got)
	}

	// Deregistered: no more refreshes.
	reg.remove(regTestDriver, "")
	Installers{ni, r}.UninstallDriver(regTestDriver)
	clk.Step(time.Hour)
	if after := reconcile(); after != 0 || drv.calls() != calls+2 {
		t.Errorf("deregistered: requeue after %v, NodeGetInfo calls %d; want none", after, drv.calls()-calls)
	}
}
