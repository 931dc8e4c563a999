package podresources

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/metrics"
)

type fakeSource struct {
	pods     []*corev1.Pod
	assigned map[types.UID]map[string]map[string][]string
	healthy  map[string][]string
	claims   map[types.UID]map[string][]Claim
}

func (f fakeSource) Pods() []*corev1.Pod { return f.pods }
func (f fakeSource) Assigned(uid types.UID, c string) map[string][]string {
	return f.assigned[uid][c]
}
func (f fakeSource) Healthy() map[string][]string { return f.healthy }
func (f fakeSource) Claims(p *corev1.Pod, c string) []Claim {
	return f.claims[p.UID][c]
}

func pod(ns, name string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	return p
}

func TestPodResources(t *testing.T) {
	withInit := pod("ns", "a", "main")
	withInit.Spec.InitContainers = []corev1.Container{
		{Name: "setup"},
		{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}
	claim := Claim{Name: "gpu-claim", Namespace: "ns", Devices: []ClaimDevice{
		{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0", CDIDeviceIDs: []string{"example.com/gpu=gpu-0"}},
		{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1"},
	}}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		assigned map[string]map[string][]string
		claims   map[string][]Claim
		want     *api.PodResources
	}{
		{"no devices", pod("ns", "a", "main"), nil, nil,
			&api.PodResources{Name: "a", Namespace: "ns", Containers: []*api.ContainerResources{{Name: "main"}}}},
		{"devices by resource", pod("ns", "a", "main", "other"), map[string]map[string][]string{
			"main": {"example.com/nic": {"n0"}, "example.com/gpu": {"g1", "g0"}},
		}, nil, &api.PodResources{Name: "a", Namespace: "ns", Containers: []*api.ContainerResources{
			{Name: "main", Devices: []*api.ContainerDevices{
				{ResourceName: "example.com/gpu", DeviceIds: []string{"g1", "g0"}},
				{ResourceName: "example.com/nic", DeviceIds: []string{"n0"}},
			}},
			{Name: "other"},
		}}},
		{"sidecars are listed, plain init containers are not", withInit, map[string]map[string][]string{
			"setup": {"example.com/gpu": {"g0"}}, "main": {"example.com/gpu": {"g0"}},
		}, nil, &api.PodResources{Name: "a", Namespace: "ns", Containers: []*api.ContainerResources{
			{Name: "sidecar"},
			{Name: "main", Devices: []*api.ContainerDevices{{ResourceName: "example.com/gpu", DeviceIds: []string{"g0"}}}},
		}}},
		{"prepared claims with their devices", pod("ns", "a", "main", "other"), nil, map[string][]Claim{"main": {claim}},
			&api.PodResources{Name: "a", Namespace: "ns", Containers: []*api.ContainerResources{
				{Name: "main", DynamicResources: []*api.DynamicResource{{ClaimName: "gpu-claim", ClaimNamespace: "ns", ClaimResources: []*api.ClaimResource{
					{DriverName: "gpu.example.com", PoolName: "node-1", DeviceName: "gpu-0", CdiDevices: []*api.CDIDevice{{Name: "example.com/gpu=gpu-0"}}},
					{DriverName: "gpu.example.com", PoolName: "node-1", DeviceName: "gpu-1"},
				}}}},
				{Name: "other"},
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fakeSource{
				assigned: map[types.UID]map[string]map[string][]string{tc.pod.UID: tc.assigned},
				claims:   map[types.UID]map[string][]Claim{tc.pod.UID: tc.claims},
			}
			got := PodResources(tc.pod, src)
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestServer(t *testing.T) {
	base, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	a, b := pod("ns", "b", "main"), pod("ns", "a", "main")
	s := &Server{Dir: filepath.Join(base, DirName), Source: fakeSource{
		pods:     []*corev1.Pod{a, b},
		assigned: map[types.UID]map[string]map[string][]string{a.UID: {"main": {"example.com/gpu": {"g0"}}}},
		healthy:  map[string][]string{"example.com/gpu": {"g0", "g1"}},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	sock := filepath.Join(s.Dir, SocketName)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no socket")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if info, _ := os.Stat(sock); info.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", info.Mode().Perm())
	}
	if info, _ := os.Stat(s.Dir); info.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", info.Mode().Perm())
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := api.NewPodResourcesListerClient(conn)
	list, err := c.List(ctx, &api.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.PodResources) != 2 || list.PodResources[0].Name != "a" || list.PodResources[1].Containers[0].Devices[0].DeviceIds[0] != "g0" {
		t.Errorf("List = %v", list)
	}
	got, err := c.Get(ctx, &api.GetPodResourcesRequest{PodName: "b", PodNamespace: "ns"})
	if err != nil || got.PodResources.Containers[0].Devices[0].ResourceName != "example.com/gpu" {
		t.Errorf("Get = %v, %v", got, err)
	}
	if _, err := c.Get(ctx, &api.GetPodResourcesRequest{PodName: "x", PodNamespace: "ns"}); err == nil {
		t.Error("Get of a missing pod succeeded")
	}
	alloc, err := c.GetAllocatableResources(ctx, &api.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 1 || len(alloc.Devices[0].DeviceIds) != 2 {
		t.Errorf("GetAllocatableResources = %v, %v", alloc, err)
	}

	// v1alpha1's List, as older clients call it: the same pods, devices
	// only.
	old, err := v1alpha1.NewPodResourcesListerClient(conn).List(ctx, &v1alpha1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("v1alpha1 List: %v", err)
	}
	want := &v1alpha1.ListPodResourcesResponse{PodResources: []*v1alpha1.PodResources{
		{Name: "a", Namespace: "ns", Containers: []*v1alpha1.ContainerResources{{Name: "main"}}},
		{Name: "b", Namespace: "ns", Containers: []*v1alpha1.ContainerResources{{Name: "main", Devices: []*v1alpha1.ContainerDevices{{ResourceName: "example.com/gpu", DeviceIds: []string{"g0"}}}}}},
	}}
	if !proto.Equal(old, want) {
		t.Errorf("v1alpha1 List = %v, want %v", old, want)
	}

	// The kubelet's request counters, by API version.
	for _, tc := range []struct {
		counter *prometheus.CounterVec
		version string
		want    float64
	}{
		{metrics.PodResourcesRequestsTotal, "v1", 4},
		{metrics.PodResourcesRequestsList, "v1", 1},
		{metrics.PodResourcesRequestsGet, "v1", 2},
		{metrics.PodResourcesErrorsGet, "v1", 1},
		{metrics.PodResourcesRequestsGetAllocatable, "v1", 1},
		{metrics.PodResourcesRequestsTotal, "v1alpha1", 1},
		{metrics.PodResourcesRequestsList, "v1alpha1", 1},
	} {
		if got := testutil.ToFloat64(tc.counter.WithLabelValues(tc.version)); got != tc.want {
			t.Errorf("%s{server_api_version=%q} = %v, want %v", tc.counter.WithLabelValues(tc.version).Desc(), tc.version, got, tc.want)
		}
	}
}

func TestRateLimited(t *testing.T) {
	call := rateLimited(rate.NewLimiter(0, 2))
	handler := func(context.Context, any) (any, error) { return "ok", nil }
	for i := range 2 {
		if got, err := call(context.Background(), nil, nil, handler); err != nil || got != "ok" {
			t.Fatalf("call %d within the burst = %v, %v", i, got, err)
		}
	}
	_, err := call(context.Background(), nil, nil, handler)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("call over the burst: %v, want ResourceExhausted", err)
	}
}
