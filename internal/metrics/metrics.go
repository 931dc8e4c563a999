package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label values shared by several metrics.
const (
	// ProbeResultSuccessful, ProbeResultFailed and ProbeResultUnknown are the
	// values of prober_probe_total's result label.
	ProbeResultSuccessful = "successful"
	ProbeResultFailed     = "failed"
	ProbeResultUnknown    = "unknown"
)

// The runtime (CRI) boundary.
var (
	// RuntimeOperations counts CRI calls by operation.
	RuntimeOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_runtime_operations_total",
		Help: "Cumulative number of runtime operations by operation type.",
	}, []string{"operation_type"})
	// RuntimeOperationsDuration times CRI calls by operation.
	RuntimeOperationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kubelet_runtime_operations_duration_seconds",
		Help: "Duration in seconds of runtime operations, by operation type, including nodelet's ownership check before a mutation.",
		// 500µs to about 4.5 min: a local status call up to a slow image pull.
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 15),
	}, []string{"operation_type"})
	// RuntimeOperationsErrors counts CRI calls that failed, by operation.
	RuntimeOperationsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_runtime_operations_errors_total",
		Help: "Cumulative number of runtime operation errors by operation type.",
	}, []string{"operation_type"})
)

// The relister (PLEG).
var (
	// PLEGRelistDuration times one relist of the runtime.
	PLEGRelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "kubelet_pleg_relist_duration_seconds",
		Help: "Duration in seconds for relisting pods in PLEG, successful or not.",
		// 1ms to about 16s.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	// PLEGLastSeen is the Unix time of the last successful relist.
	PLEGLastSeen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelet_pleg_last_seen_seconds",
		Help: "Timestamp in seconds when PLEG was last seen active.",
	})
	// PLEGRelistErrors counts relists that could not list the runtime.
	PLEGRelistErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_pleg_relist_errors_total",
		Help: "Number of relists that failed to list the runtime.",
	})
	// EventedPLEGConnections counts subscriptions to the runtime's events
	// that were sent; EventedPLEGConnectionErrors the streams that failed.
	EventedPLEGConnections = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_evented_pleg_connection_success_count",
		Help: "The number of times a subscription to the runtime's events was made.",
	})
	EventedPLEGConnectionErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_evented_pleg_connection_error_count",
		Help: "The number of errors of the stream of the runtime's events.",
	})
)

// Pods.
var (
	// PodStartDuration is the time from first seeing a pod to all of its
	// containers running.
	PodStartDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kubelet_pod_start_duration_seconds",
		Help:    "Duration in seconds from nodelet seeing a pod for the first time to the pod starting to run.",
		Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 30, 60},
	})
	// PodStatusWrites counts pod status patches.
	PodStatusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_pod_status_writes_total",
		Help: "Pod status patches sent to the API server.",
	})
	// PodWorkerSyncs counts the syncs the pod workers ran, by result.
	PodWorkerSyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodelet_pod_worker_syncs_total",
		Help: "Pod syncs run by the per-pod workers, by result (ok, error, canceled: stopped by the pod's deletion; settled: skipped, the runtime change having been seen by the sync before).",
	}, []string{"result"})
)

// In-place pod resizes, with the kubelet's names. The number of pending
// and in-progress resizes are read from the pods' conditions when scraped
// (State).
var (
	// ContainerRequestedResizes counts the resource changes of the resizes
	// asked for, per container and resource.
	ContainerRequestedResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_container_requested_resizes_total",
		Help: "Number of requested resizes, counted at the container level. Different resources on the same container are counted separately. The 'requirement' label refers to 'requests' or 'limits'; the 'operation' label can be one of 'add', 'remove', 'increase' or 'decrease'.",
	}, []string{"resource", "requirement", "operation"})
	// PodResizeDuration times the in-place update of a pod's containers.
	PodResizeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubelet_pod_resize_duration_milliseconds",
		Help:    "Duration in milliseconds to actuate a pod resize",
		Buckets: []float64{10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000, 300000, 600000},
	}, []string{"success"})
	// PodInfeasibleResizes counts the resizes found infeasible.
	PodInfeasibleResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_pod_infeasible_resizes_total",
		Help: "Number of infeasible resizes for pods.",
	}, []string{"reason_detail"})
)

// Probes.
var (
	// ProbeTotal counts probes by type and result, per container.
	ProbeTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "prober_probe_total",
		Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	// ProbeDuration times probes, whatever their result.
	ProbeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "prober_probe_duration_seconds",
		Help: "Duration in seconds for a probe response.",
		// 1ms to about 65s: probe timeouts are whole seconds.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
	}, []string{"probe_type", "container", "pod", "namespace"})
)

// The node, its lease and checkpoints.
var (
	// NodeName is 1 with the node's name as label.
	NodeName = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelet_node_name",
		Help: "The node's name. The count is always 1.",
	}, []string{"node"})
	// NodeStatusPatches counts Node status patches.
	NodeStatusPatches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_node_status_patches_total",
		Help: "Patches of the Node status written by the node reconciler.",
	})
	// LeaseRenewDuration times one attempt to renew the node lease.
	LeaseRenewDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "nodelet_lease_renew_duration_seconds",
		Help:    "Time taken by one attempt to renew the node lease, successful or not.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	// LeaseRenewFailures counts failed lease renewals.
	LeaseRenewFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_lease_renew_failures_total",
		Help: "Attempts to renew the node lease that failed.",
	})
	// CheckpointWriteDuration times a durable checkpoint write.
	CheckpointWriteDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "nodelet_checkpoint_write_duration_seconds",
		Help: "Time to write a checkpoint durably: temporary file, fsync, rename and directory fsync.",
		// 250µs to about 8s: a page-cache write to a slow disk under load.
		Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
	})
	// CheckpointCorrupt counts checkpoints found corrupt and set aside.
	CheckpointCorrupt = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_checkpoint_corrupt_total",
		Help: "Number of stored checkpoints found corrupt and moved aside.",
	})
)

// The referenced-object store: ConfigMaps, Secrets and Services.
var (
	// ObjectStoreWatches counts the watches open on referenced objects.
	ObjectStoreWatches = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nodelet_object_store_watches",
		Help: "Watches open on referenced objects, by resource: one per ConfigMap or Secret, one per namespace for services plus default/kubernetes.",
	}, []string{"resource"})
	// ObjectStoreGetRequests counts the GETs of the Cache and Get strategies.
	ObjectStoreGetRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodelet_object_store_get_requests_total",
		Help: "GET requests made for referenced objects (Cache and Get strategies), by resource.",
	}, []string{"resource"})
	// ObjectStoreLists counts the lists of watched objects.
	ObjectStoreLists = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodelet_object_store_lists_total",
		Help: "Lists of watched objects: the first one and relists after an expired resource version or a broken watch, by resource.",
	}, []string{"resource"})
)

// The client certificate, with the kubelet's names.
var (
	// ClientCertificateTTL is the time left until the client certificate
	// in use expires.
	ClientCertificateTTL = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelet_certificate_manager_client_ttl_seconds",
		Help: "Seconds until the client certificate in use expires; negative when it has. Set only when the certificate is rotated (rotateCertificates).",
	})
	// ClientCertificateRenewErrors counts failed attempts to renew the
	// client certificate.
	ClientCertificateRenewErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubelet_certificate_manager_client_expiration_renew_errors",
		Help: "Counter of client certificate renewal errors.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(
		RuntimeOperations, RuntimeOperationsDuration, RuntimeOperationsErrors,
		PLEGRelistDuration, PLEGLastSeen, PLEGRelistErrors,
		EventedPLEGConnections, EventedPLEGConnectionErrors,
		PodStartDuration, PodStatusWrites, PodWorkerSyncs,
		ContainerRequestedResizes, PodResizeDuration, PodInfeasibleResizes,
		ProbeTotal, ProbeDuration,
		NodeName, NodeStatusPatches, LeaseRenewDuration, LeaseRenewFailures,
		CheckpointWriteDuration, CheckpointCorrupt,
		ObjectStoreWatches, ObjectStoreGetRequests, ObjectStoreLists,
		ClientCertificateTTL, ClientCertificateRenewErrors,
		runtimeState,
	)
}
