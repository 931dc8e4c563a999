package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// DRAAnyDriver is the driver_name of dra_resource_claims_in_use that
// counts the claims in use across all drivers (a claim with devices of
// two drivers counts once there, once under each driver).
const DRAAnyDriver = "<any>"

// Dynamic Resource Allocation, with the kubelet's names and labels.
var (
	// DRAOperationsDuration times the preparation and unpreparation of
	// all the claims of one pod; operation_name is PrepareResources or
	// UnprepareResources.
	DRAOperationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dra_operations_duration_seconds",
		Help:    "Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation. The number of failed operations is provided through the histogram's overall count.",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_name", "is_error"})
	// DRAGRPCOperationsDuration times each call to a DRA driver's plugin
	// by its full gRPC method name and status code.
	DRAGRPCOperationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dra_grpc_operations_duration_seconds",
		Help:    "Duration in seconds of the DRA gRPC operations",
		Buckets: prometheus.DefBuckets,
	}, []string{"driver_name", "method_name", "grpc_status_code"})
	// DRAResourceClaimsInUse counts the claims used by pods on the node,
	// by driver and across all drivers (DRAAnyDriver).
	DRAResourceClaimsInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dra_resource_claims_in_use",
		Help: "The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from different drivers. Instead, use the count for the <any> driver_name.",
	}, []string{"driver_name"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(DRAOperationsDuration, DRAGRPCOperationsDuration, DRAResourceClaimsInUse)
	DRAResourceClaimsInUse.WithLabelValues(DRAAnyDriver).Set(0)
}
