package podresources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"

	"github.com/nodelet/nodelet/internal/metrics"
)

const (
	// DirName is the API's directory under the root directory.
	DirName = "pod-resources"
	// SocketName is its socket there.
	SocketName = "kubelet.sock"
	// QPS is how many calls a second the API answers, all clients
	// together, as the kubelet's does; a call over it fails with
	// ResourceExhausted.
	QPS = 100
	// Burst is how many calls the API answers at once above QPS.
	Burst = 10
)

// Source is what the API reports.
type Source interface {
	// Pods returns the pods admitted to the node that have not finished.
	Pods() []*corev1.Pod
	// Assigned returns the devices a container holds, by resource.
	Assigned(uid types.UID, container string) map[string][]string
	// Healthy returns the healthy devices of each resource.
	Healthy() map[string][]string
	// Claims returns the prepared ResourceClaims a container of the pod
	// uses, in name order.
	Claims(pod *corev1.Pod, container string) []Claim
}

// Claim is a prepared ResourceClaim, with the devices its drivers
// prepared.
type Claim struct {
	Name, Namespace string
	Devices         []ClaimDevice
}

// ClaimDevice is one device a driver prepared for a claim.
type ClaimDevice struct {
	Driver, Pool, Device string
	CDIDeviceIDs         []string
}

// PodResources is what pod holds: its containers (and restartable init
// containers, which run beside them) with their device plugins' devices
// and their prepared ResourceClaims.
func PodResources(pod *corev1.Pod, src Source) *api.PodResources {
	out := &api.PodResources{Name: pod.Name, Namespace: pod.Namespace}
	add := func(name string) {
		out.Containers = append(out.Containers, &api.ContainerResources{
			Name:             name,
			Devices:          Devices(src.Assigned(pod.UID, name)),
			DynamicResources: DynamicResources(src.Claims(pod, name)),
		})
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		add(c.Name)
	}
	return out
}

// Devices turns devices by resource into the API's list, by resource name.
func Devices(byResource map[string][]string) []*api.ContainerDevices {
	var out []*api.ContainerDevices
	for _, name := range slices.Sorted(maps.Keys(byResource)) {
		if len(byResource[name]) > 0 {
			out = append(out, &api.ContainerDevices{ResourceName: name, DeviceIds: slices.Clone(byResource[name])})
		}
	}
	return out
}

// DynamicResources turns prepared claims into the API's list, each
// device with its driver, pool and CDI device IDs.
func DynamicResources(claims []Claim) []*api.DynamicResource {
	var out []*api.DynamicResource
	for _, c := range claims {
		r := &api.DynamicResource{ClaimName: c.Name, ClaimNamespace: c.Namespace}
		for _, d := range c.Devices {
			res := &api.ClaimResource{DriverName: d.Driver, PoolName: d.Pool, DeviceName: d.Device}
			for _, id := range d.CDIDeviceIDs {
				res.CdiDevices = append(res.CdiDevices, &api.CDIDevice{Name: id})
			}
			r.ClaimResources = append(r.ClaimResources, res)
		}
		out = append(out, r)
	}
	return out
}

// Server serves the API over Source.
type Server struct {
	api.UnimplementedPodResourcesListerServer
	// Dir is <rootDir>/pod-resources.
	Dir    string
	Source Source
	Logger logr.Logger
}

// List reports every admitted pod that has not finished.
func (s *Server) List(context.Context, *api.ListPodResourcesRequest) (*api.ListPodResourcesResponse, error) {
	counted(apiV1, metrics.PodResourcesRequestsList)
	return s.list(), nil
}

// list is List's answer.
func (s *Server) list() *api.ListPodResourcesResponse {
	resp := &api.ListPodResourcesResponse{}
	pods := s.Source.Pods()
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if a.Namespace != b.Namespace {
			return strings.Compare(a.Namespace, b.Namespace)
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, p := range pods {
		resp.PodResources = append(resp.PodResources, PodResources(p, s.Source))
	}
	return resp
}

// Get reports one pod.
func (s *Server) Get(_ context.Context, req *api.GetPodResourcesRequest) (*api.GetPodResourcesResponse, error) {
	counted(apiV1, metrics.PodResourcesRequestsGet)
	for _, p := range s.Source.Pods() {
		if p.Name == req.GetPodName() && p.Namespace == req.GetPodNamespace() {
			return &api.GetPodResourcesResponse{PodResources: PodResources(p, s.Source)}, nil
		}
	}
	metrics.PodResourcesErrorsGet.WithLabelValues(apiV1).Inc()
	return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
}

// GetAllocatableResources reports the healthy devices.
func (s *Server) GetAllocatableResources(context.Context, *api.AllocatableResourcesRequest) (*api.AllocatableResourcesResponse, error) {
	counted(apiV1, metrics.PodResourcesRequestsGetAllocatable)
	return &api.AllocatableResourcesResponse{Devices: Devices(s.Source.Healthy())}, nil
}

// The API versions served, as the request counters' server_api_version.
const (
	apiV1       = "v1"
	apiV1alpha1 = "v1alpha1"
)

// counted counts a request of the API version in the total and in the
// method's counter.
func counted(version string, method *prometheus.CounterVec) {
	metrics.PodResourcesRequestsTotal.WithLabelValues(version).Inc()
	method.WithLabelValues(version).Inc()
}

// v1alpha1Server serves the API's v1alpha1, which the kubelet still
// serves beside v1 and older clients (the node e2e suite's among them)
// call: List, each container's devices.
type v1alpha1Server struct {
	v1alpha1.UnimplementedPodResourcesListerServer
	s *Server
}

// List reports what v1's List does, devices only.
func (a v1alpha1Server) List(context.Context, *v1alpha1.ListPodResourcesRequest) (*v1alpha1.ListPodResourcesResponse, error) {
	counted(apiV1alpha1, metrics.PodResourcesRequestsList)
	return toV1alpha1(a.s.list()), nil
}

// toV1alpha1 converts a v1 List answer to v1alpha1's: names and devices.
func toV1alpha1(in *api.ListPodResourcesResponse) *v1alpha1.ListPodResourcesResponse {
	out := &v1alpha1.ListPodResourcesResponse{}
	for _, p := range in.GetPodResources() {
		pr := &v1alpha1.PodResources{Name: p.GetName(), Namespace: p.GetNamespace()}
		for _, c := range p.GetContainers() {
			cr := &v1alpha1.ContainerResources{Name: c.GetName()}
			for _, d := range c.GetDevices() {
				cr.Devices = append(cr.Devices, &v1alpha1.ContainerDevices{ResourceName: d.GetResourceName(), DeviceIds: d.GetDeviceIds()})
			}
			pr.Containers = append(pr.Containers, cr)
		}
		out.PodResources = append(out.PodResources, pr)
	}
	return out
}

// Start serves the API until ctx ends, on a socket made anew (0600, in a
// 0700 directory).
func (s *Server) Start(ctx context.Context) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("creating the pod resources directory: %w", err)
	}
	if err := os.Chmod(s.Dir, 0o700); err != nil {
		return fmt.Errorf("restricting the pod resources directory: %w", err)
	}
	sock := filepath.Join(s.Dir, SocketName)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale pod resources socket: %w", err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		// Pods must not stop with it (a root directory too deep for a
		// socket path, in tests and simulations).
		s.Logger.Error(err, "Unable to serve the pod resources API", "socket", sock)
		<-ctx.Done()
		return nil
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		_ = l.Close()
		return fmt.Errorf("restricting the pod resources socket: %w", err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(rateLimited(rate.NewLimiter(QPS, Burst))))
	api.RegisterPodResourcesListerServer(srv, s)
	v1alpha1.RegisterPodResourcesListerServer(srv, v1alpha1Server{s: s})
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	s.Logger.Info("Serving the pod resources API", "socket", sock)
	if err := srv.Serve(l); err != nil && ctx.Err() == nil {
		return fmt.Errorf("serving the pod resources API: %w", err)
	}
	return nil
}

// rateLimited fails the calls over l with ResourceExhausted, as the
// kubelet does, so that no client can keep the node agent busy answering.
func rateLimited(l *rate.Limiter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !l.Allow() {
			return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
		}
		return handler(ctx, req)
	}
}
