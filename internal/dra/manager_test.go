package dra

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/internal/metrics"
)

// answers is how a fake driver answers: fail is each claim's error,
// callErr the calls', leaveOut drops the claims from the answer.
type answers struct {
	fail     string
	callErr  error
	leaveOut bool
}

// fakeDriver is a DRA driver's service, called in process.
type fakeDriver struct {
	name string
	answers

	mu sync.Mutex
	// prepares and unprepares are the claim UIDs of each call.
	prepares, unprepares [][]string
}

func (f *fakeDriver) NodePrepareResources(_ context.Context, in *drapb.NodePrepareResourcesRequest, _ ...grpc.CallOption) (*drapb.NodePrepareResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var uids []string
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range in.GetClaims() {
		uids = append(uids, c.GetUid())
		if f.leaveOut {
			continue
		}
		resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{Error: f.fail, Devices: []*drapb.Device{{
			RequestNames: []string{"r"}, PoolName: "node", DeviceName: "dev-" + c.GetUid(),
			CdiDeviceIds: []string{f.name + "/dev=" + c.GetUid()},
		}}}
	}
	f.prepares = append(f.prepares, uids)
	return resp, f.callErr
}

func (f *fakeDriver) NodeUnprepareResources(_ context.Context, in *drapb.NodeUnprepareResourcesRequest, _ ...grpc.CallOption) (*drapb.NodeUnprepareResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var uids []string
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range in.GetClaims() {
		uids = append(uids, c.GetUid())
		resp.Claims[c.GetUid()] = &drapb.NodeUnprepareResourceResponse{Error: f.fail}
	}
	f.unprepares = append(f.unprepares, uids)
	return resp, f.callErr
}

func (f *fakeDriver) calls() (prepares, unprepares [][]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.prepares), slices.Clone(f.unprepares)
}

// fakeDrivers are the registered drivers.
type fakeDrivers map[string]*fakeDriver

func (d fakeDrivers) Client(name string) (drapb.DRAPluginClient, time.Duration, error) {
	if f, ok := d[name]; ok {
		return f, time.Second, nil
	}
	return nil, 0, fmt.Errorf("DRA driver %s is not registered", name)
}

// allocated returns a claim allocated to drivers (one device each) and
// reserved for pods.
func allocated(name string, pods []types.UID, drivers ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: string(p), UID: p})
	}
	for _, d := range drivers {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: d, Pool: "node", Device: "d"})
	}
	return c
}

// podUsing returns a pod of that UID whose one container uses every claim.
func podUsing(uid types.UID, claims ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: "ns", UID: uid}}
	c := v1.Container{Name: "c"}
	for _, n := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: n, ResourceClaimName: ptr.To(n)})
		c.Resources.Claims = append(c.Resources.Claims, v1.ResourceClaim{Name: n})
	}
	p.Spec.Containers = []v1.Container{c}
	return p
}

func newReader(objs ...client.Object) client.Reader {
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
}

func TestPrepareRefuses(t *testing.T) {
	pods := []types.UID{"p"}
	gpu := &fakeDriver{name: "gpu.example.com"}
	reader := newReader(allocated("gpu", pods, "gpu.example.com"), allocated("empty", pods),
		allocated("net", pods, "net.example.com"), allocated("other", []types.UID{"q"}, "gpu.example.com"))
	cases := []struct {
		name    string
		pod     *v1.Pod
		driver  answers
		wantErr string
	}{
		{name: "no claims", pod: podUsing("p")},
		{name: "a claim needing no driver", pod: podUsing("p", "empty")},
		{name: "a driver that is not registered", pod: podUsing("p", "empty", "gpu", "net"),
			wantErr: "prepare dynamic resources: DRA driver net.example.com is not registered"},
		{name: "a claim that does not exist", pod: podUsing("p", "missing"),
			wantErr: "prepare dynamic resources: fetch ResourceClaim missing:"},
		{name: "a claim reserved for another pod", pod: podUsing("p", "other"),
			wantErr: "prepare dynamic resources: pod p (p) is not allowed to use ResourceClaim other (other-uid)"},
		{name: "a driver that fails the claim", pod: podUsing("p", "gpu"), driver: answers{fail: "no such device"},
			wantErr: "prepare dynamic resources: NodePrepareResources failed for ResourceClaim gpu: no such device"},
		{name: "a driver whose call fails", pod: podUsing("p", "gpu"), driver: answers{callErr: errors.New("unavailable")},
			wantErr: "prepare dynamic resources: NodePrepareResources: unavailable"},
		{name: "a driver that leaves a claim out", pod: podUsing("p", "gpu"), driver: answers{leaveOut: true},
			wantErr: "prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gpu.answers = tc.driver
			m := NewManager(Options{Reader: reader, Drivers: fakeDrivers{"gpu.example.com": gpu}})
			err := m.Prepare(context.Background(), tc.pod)
			errorAsWanted(t, err, tc.wantErr)
			if err == nil {
				return
			}
			if _, err := m.CDIDevices(tc.pod, &tc.pod.Spec.Containers[0]); err == nil {
				t.Error("a container of a pod whose claims failed gets devices")
			}
		})
	}
}

func TestPrepareBatchesSharesAndUnprepares(t *testing.T) {
	ctx := context.Background()
	both := []types.UID{"p1", "p2"}
	reader := newReader(allocated("gpu", both, "gpu.example.com"), allocated("net", both, "net.example.com"),
		allocated("mixed", append(both, "p3"), "gpu.example.com", "net.example.com"))
	gpu, nic := &fakeDriver{name: "gpu.example.com"}, &fakeDriver{name: "net.example.com"}
	drivers := fakeDrivers{"gpu.example.com": gpu, "net.example.com": nic}
	path := filepath.Join(t.TempDir(), CheckpointName)
	m := NewManager(Options{Reader: reader, Drivers: drivers, StatePath: path})

	p1 := podUsing("p1", "gpu", "net", "mixed")
	if err := m.Prepare(ctx, p1); err != nil {
		t.Fatal(err)
	}
	prep, _ := gpu.calls()
	if diff := cmp.Diff([][]string{{"gpu-uid", "mixed-uid"}}, prep); diff != "" {
		t.Errorf("gpu driver's calls, one for all its claims (-want +got):\n%s", diff)
	}
	prep, _ = nic.calls()
	if diff := cmp.Diff([][]string{{"net-uid", "mixed-uid"}}, prep); diff != "" {
		t.Errorf("net driver's calls (-want +got):\n%s", diff)
	}
	ids, err := m.CDIDevices(p1, &p1.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpu.example.com/dev=gpu-uid", "gpu.example.com/dev=mixed-uid", "net.example.com/dev=mixed-uid", "net.example.com/dev=net-uid"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("CDI devices (-want +got):\n%s", diff)
	}

	for driver, want := range map[string]float64{metrics.DRAAnyDriver: 3, "gpu.example.com": 2, "net.example.com": 2} {
		if got := testutil.ToFloat64(metrics.DRAResourceClaimsInUse.WithLabelValues(driver)); got != want {
			t.Errorf("dra_resource_claims_in_use{driver_name=%q} = %v, want %v", driver, got, want)
		}
	}
	var names []string
	for _, c := range m.ContainerClaims(p1, &p1.Spec.Containers[0]) {
		names = append(names, c.Name)
		if !c.Prepared || len(c.Drivers) == 0 || len(c.Drivers[0].Devices) == 0 {
			t.Errorf("claim %s reported without its prepared devices: %+v", c.Name, c)
		}
	}
	if diff := cmp.Diff([]string{"gpu", "mixed", "net"}, names); diff != "" {
		t.Errorf("the container's claims for the pod resources API (-want +got):\n%s", diff)
	}
	if p3 := podUsing("p3", "mixed"); len(m.ContainerClaims(p3, &p3.Spec.Containers[0])) != 0 {
		t.Error("a claim not prepared for the pod is reported for it")
	}

	// A restarted manager knows the prepared claims and prepares nothing again.
	m = NewManager(Options{Reader: reader, Drivers: drivers, StatePath: path})
	if err := m.Prepare(ctx, p1); err != nil {
		t.Fatal(err)
	}
	p2 := podUsing("p2", "mixed")
	if err := m.Prepare(ctx, p2); err != nil {
		t.Fatal(err)
	}
	if prep, _ := gpu.calls(); len(prep) != 1 {
		t.Errorf("gpu driver called again: %v", prep)
	}
	if ids, err := m.CDIDevices(p2, &p2.Spec.Containers[0]); err != nil || len(ids) != 2 {
		t.Errorf("second pod's devices %v, %v", ids, err)
	}
	if got := m.PodUIDs(); !slices.Equal(got, both) {
		t.Errorf("pods using claims %v, want %v", got, both)
	}

	// The first pod done: its own claims are unprepared, the shared one stays.
	if err := m.Unprepare(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if _, un := gpu.calls(); !cmp.Equal(un, [][]string{{"gpu-uid"}}) {
		t.Errorf("gpu driver's unprepares %v", un)
	}
	if _, un := nic.calls(); !cmp.Equal(un, [][]string{{"net-uid"}}) {
		t.Errorf("net driver's unprepares %v", un)
	}
	if err := m.Unprepare(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if _, un := gpu.calls(); len(un) != 1 {
		t.Errorf("a second Unprepare called the driver again: %v", un)
	}

	// The last pod done: the shared claim is unprepared by both its drivers, and forgotten.
	nic.fail = "busy"
	if err := m.Unprepare(ctx, "p2"); err == nil || err.Error() != "unprepare dynamic resources: NodeUnprepareResources failed for ResourceClaim mixed: busy" {
		t.Fatalf("a failed unprepare: %v", err)
	}
	p3 := podUsing("p3", "mixed")
	if err := m.Prepare(ctx, p3); err == nil || err.Error() != "prepare dynamic resources: ResourceClaim mixed is being unprepared" {
		t.Errorf("a claim being unprepared given to another pod: %v", err)
	}
	nic.fail = ""
	if err := m.Unprepare(ctx, "p2"); err != nil {
		t.Fatal(err)
	}
	if _, un := gpu.calls(); !cmp.Equal(un, [][]string{{"gpu-uid"}, {"mixed-uid"}, {"mixed-uid"}}) {
		t.Errorf("gpu driver's unprepares %v", un)
	}
	if got := m.Claims(); len(got) != 0 {
		t.Errorf("claims left: %v", got)
	}
	if got := testutil.ToFloat64(metrics.DRAResourceClaimsInUse.WithLabelValues(metrics.DRAAnyDriver)); got != 0 {
		t.Errorf("claims in use once every pod is done: %v", got)
	}
	if got := testutil.CollectAndCount(metrics.DRAResourceClaimsInUse, "dra_resource_claims_in_use"); got != 1 {
		t.Errorf("dra_resource_claims_in_use has %d series once every pod is done, want only %s's", got, metrics.DRAAnyDriver)
	}
	if got := testutil.CollectAndCount(metrics.DRAOperationsDuration, "dra_operations_duration_seconds"); got != 4 {
		t.Errorf("dra_operations_duration_seconds has %d series, want PrepareResources and UnprepareResources, each with and without errors", got)
	}
	st, err := LoadState(path, time.Now())
	if err != nil || len(st.Claims) != 0 {
		t.Errorf("checkpoint after the last unprepare: %v, %v", st, err)
	}
}

func TestPrepareSkipsWhatTheAllocationSkips(t *testing.T) {
	claim := allocated("net", []types.UID{"p"}, "net.example.com")
	claim.Status.Allocation.Devices.Results[0].SkipNodeOperations = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}
	m := NewManager(Options{Reader: newReader(claim)})
	p := podUsing("p", "net")
	if err := m.Prepare(context.Background(), p); err != nil {
		t.Fatalf("a driver that is skipped need not be registered: %v", err)
	}
	if ids, err := m.CDIDevices(p, &p.Spec.Containers[0]); err != nil || len(ids) != 0 {
		t.Errorf("devices %v, %v", ids, err)
	}
	if err := m.Unprepare(context.Background(), "p"); err != nil {
		t.Fatalf("nothing to unprepare: %v", err)
	}
}

func TestCorruptCheckpointStartsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointName)
	if err := SaveState(path, State{}); err != nil {
		t.Fatal(err)
	}
	if err := writeGarbage(path); err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{StatePath: path})
	if len(m.Claims()) != 0 {
		t.Fatal("claims from a corrupt checkpoint")
	}
}
