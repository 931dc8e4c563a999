package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The pod resources API's request counters, with the kubelet's names; each
// is by server_api_version (v1, v1alpha1). Calls refused by the rate limit
// are not counted, as the kubelet's.
var (
	PodResourcesRequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_resources_endpoint_requests_total",
		Help: "Cumulative number of requests to the PodResource endpoint. Broken down by server api version.",
	}, []string{"server_api_version"})
	PodResourcesRequestsList = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_resources_endpoint_requests_list",
		Help: "Number of requests to the PodResource List endpoint. Broken down by server api version.",
	}, []string{"server_api_version"})
	PodResourcesRequestsGetAllocatable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_resources_endpoint_requests_get_allocatable",
		Help: "Number of requests to the PodResource GetAllocatableResources endpoint. Broken down by server api version.",
	}, []string{"server_api_version"})
	PodResourcesErrorsList = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_resources_endpoint_errors_list",
		Help: "Number of requests to the PodResource List endpoint which returned error. Broken down by server api version.",
	}, []string{"server_api_version"})
	PodResourcesErrorsGetAllocatable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_resources_endpoint_errors_get_allocatable",
		Help: "Number of requests to the PodResource GetAllocatableResources endpoint which returned error. Broken down by server api version.",
	}, []string{"server_api_version"})
	PodResourcesRequestsGet = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_resources_endpoint_requests_get",
		Help: "Number of requests to the PodResource Get endpoint. Broken down by server api version.",
	}, []string{"server_api_version"})
	PodResourcesErrorsGet = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_resources_endpoint_errors_get",
		Help: "Number of requests to the PodResource Get endpoint which returned error. Broken down by server api version.",
	}, []string{"server_api_version"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(
		PodResourcesRequestsTotal, PodResourcesRequestsList, PodResourcesRequestsGetAllocatable,
		PodResourcesErrorsList, PodResourcesErrorsGetAllocatable, PodResourcesRequestsGet, PodResourcesErrorsGet,
	)
}
