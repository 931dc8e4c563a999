package metrics

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/internal/metrics/metricstest"
)

// kind is a metric's Prometheus type.
type kind string

const (
	counter   kind = "counter"
	gauge     kind = "gauge"
	histogram kind = "histogram"
)

// defined is every metric nodelet defines: the kubelet's name and labels
// where the kubelet has the metric, nodelet_ otherwise. A metric added to
// the package must be added here (TestEveryDefinedMetricIsListed).
var defined = []struct {
	c      prometheus.Collector // nil for the families of the state collector
	name   string
	kind   kind
	labels []string
}{
	{RuntimeOperations, "kubelet_runtime_operations_total", counter, []string{"operation_type"}},
	{RuntimeOperationsDuration, "kubelet_runtime_operations_duration_seconds", histogram, []string{"operation_type"}},
	{RuntimeOperationsErrors, "kubelet_runtime_operations_errors_total", counter, []string{"operation_type"}},
	{PLEGRelistDuration, "kubelet_pleg_relist_duration_seconds", histogram, nil},
	{PLEGLastSeen, "kubelet_pleg_last_seen_seconds", gauge, nil},
	{PLEGRelistErrors, "nodelet_pleg_relist_errors_total", counter, nil},
	{EventedPLEGConnections, "kubelet_evented_pleg_connection_success_count", counter, nil},
	{EventedPLEGConnectionErrors, "kubelet_evented_pleg_connection_error_count", counter, nil},
	{PodStartDuration, "kubelet_pod_start_duration_seconds", histogram, nil},
	{PodStatusWrites, "nodelet_pod_status_writes_total", counter, nil},
	{PodWorkerSyncs, "nodelet_pod_worker_syncs_total", counter, []string{"result"}},
	{ContainerRequestedResizes, "kubelet_container_requested_resizes_total", counter, []string{"resource", "requirement", "operation"}},
	{PodResizeDuration, "kubelet_pod_resize_duration_milliseconds", histogram, []string{"success"}},
	{PodInfeasibleResizes, "kubelet_pod_infeasible_resizes_total", counter, []string{"reason_detail"}},
	{ProbeTotal, "prober_probe_total", counter, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}},
	{ProbeDuration, "prober_probe_duration_seconds", histogram, []string{"probe_type", "container", "pod", "namespace"}},
	{NodeName, "kubelet_node_name", gauge, []string{"node"}},
	{NodeStatusPatches, "nodelet_node_status_patches_total", counter, nil},
	{LeaseRenewDuration, "nodelet_lease_renew_duration_seconds", histogram, nil},
	{LeaseRenewFailures, "nodelet_lease_renew_failures_total", counter, nil},
	{CheckpointWriteDuration, "nodelet_checkpoint_write_duration_seconds", histogram, nil},
	{CheckpointCorrupt, "nodelet_checkpoint_corrupt_total", counter, nil},
	{ObjectStoreWatches, "nodelet_object_store_watches", gauge, []string{"resource"}},
	{ObjectStoreGetRequests, "nodelet_object_store_get_requests_total", counter, []string{"resource"}},
	{ObjectStoreLists, "nodelet_object_store_lists_total", counter, []string{"resource"}},
	{Evictions, "kubelet_evictions", counter, []string{"eviction_signal"}},
	{EvictionStatsAge, "kubelet_eviction_stats_age_seconds", histogram, []string{"eviction_signal"}},
	{ImageGarbageCollected, "kubelet_image_garbage_collected_total", counter, []string{"reason"}},
	{ContainerLogRotations, "nodelet_container_log_rotations_total", counter, nil},
	{ContainerLogRotationFailures, "nodelet_container_log_rotation_failures_total", counter, nil},
	{ContainerLogLinksRepaired, "nodelet_container_log_links_repaired_total", counter, nil},
	{DRAOperationsDuration, "dra_operations_duration_seconds", histogram, []string{"operation_name", "is_error"}},
	{DRAGRPCOperationsDuration, "dra_grpc_operations_duration_seconds", histogram, []string{"driver_name", "method_name", "grpc_status_code"}},
	{DRAResourceClaimsInUse, "dra_resource_claims_in_use", gauge, []string{"driver_name"}},
	{PodResourcesRequestsTotal, "kubelet_pod_resources_endpoint_requests_total", counter, []string{"server_api_version"}},
	{PodResourcesRequestsList, "kubelet_pod_resources_endpoint_requests_list", counter, []string{"server_api_version"}},
	{PodResourcesRequestsGetAllocatable, "kubelet_pod_resources_endpoint_requests_get_allocatable", counter, []string{"server_api_version"}},
	{PodResourcesErrorsList, "kubelet_pod_resources_endpoint_errors_list", counter, []string{"server_api_version"}},
	{PodResourcesErrorsGetAllocatable, "kubelet_pod_resources_endpoint_errors_get_allocatable", counter, []string{"server_api_version"}},
	{PodResourcesRequestsGet, "kubelet_pod_resources_endpoint_requests_get", counter, []string{"server_api_version"}},
	{PodResourcesErrorsGet, "kubelet_pod_resources_endpoint_errors_get", counter, []string{"server_api_version"}},
	{ContainersGarbageCollected, "nodelet_container_garbage_collected_total", counter, nil},
	{SandboxesGarbageCollected, "nodelet_sandbox_garbage_collected_total", counter, nil},
	{CgroupManagerDuration, "kubelet_cgroup_manager_duration_seconds", histogram, []string{"operation_type"}},
	{ClientCertificateTTL, "kubelet_certificate_manager_client_ttl_seconds", gauge, nil},
	{ClientCertificateRenewErrors, "kubelet_certificate_manager_client_expiration_renew_errors", counter, nil},
	// Read from the volume stats cache when scraped, by one collector.
	// Read from State when scraped.
	{nil, "kubelet_running_pods", gauge, nil},
	{nil, "kubelet_running_containers", gauge, []string{"container_state"}},
	{nil, "nodelet_pods", gauge, []string{"phase"}},
	{nil, "kubelet_pod_pending_resizes", gauge, []string{"reason", "priority_bucket"}},
	{nil, "kubelet_pod_in_progress_resizes", gauge, nil},
}

func kindOf(c prometheus.Collector) kind {
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		return histogram
	case prometheus.Gauge, *prometheus.GaugeVec: // before Counter, which a Gauge also is
		return gauge
	case prometheus.Counter, *prometheus.CounterVec:
		return counter
	}
	return ""
}

func TestEveryMetricIsRegisteredOnceWithItsNameAndLabels(t *testing.T) {
	for _, m := range defined {
		if m.c == nil {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(metricstest.Described(m.c)).To(Equal(map[string][]string{m.name: m.labels}))
			g.Expect(kindOf(m.c)).To(Equal(m.kind))
			// Registered already, by this very collector: registering it
			// again is refused.
			err := ctrlmetrics.Registry.Register(m.c)
			var already prometheus.AlreadyRegisteredError
			g.Expect(errors.As(err, &already)).To(BeTrue(), "got %v", err)
			g.Expect(already.ExistingCollector).To(BeIdenticalTo(m.c))
		})
	}
}

func TestStateFamiliesAreRegisteredWithTheirNamesAndLabels(t *testing.T) {
	g := NewWithT(t)
	want := map[string][]string{}
	for _, m := range defined {
		if m.c == nil {
			want[m.name] = m.labels
		}
	}
	g.Expect(metricstest.Described(runtimeState)).To(Equal(want))
	err := ctrlmetrics.Registry.Register(runtimeState)
	var already prometheus.AlreadyRegisteredError
	g.Expect(errors.As(err, &already)).To(BeTrue(), "got %v", err)
	g.Expect(already.ExistingCollector).To(BeIdenticalTo(runtimeState))

	// Served under those names by controller-runtime's registry, as
	// gauges.
	one := 1
	SetStateSource(func(context.Context) State {
		return State{
			PodsByPhase: map[string]int{"Running": 1}, RunningPods: &one, ContainersByState: map[string]int{"running": 1},
			PendingResizes: map[PendingResize]int{{Reason: "deferred", PriorityBucket: "normal"}: 1}, InProgressResizes: &one,
		}
	})
	t.Cleanup(func() { SetStateSource(nil) })
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	served := map[string]string{}
	for _, f := range families {
		served[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	for name := range want {
		g.Expect(served).To(HaveKeyWithValue(name, string(gauge)))
	}
}

// Every metric name in the package's source is in defined, so that a new
// one is checked too.
func TestEveryDefinedMetricIsListed(t *testing.T) {
	g := NewWithT(t)
	fset := token.NewFileSet()
	var inSource []string
	files, err := filepath.Glob("*.go")
	g.Expect(err).NotTo(HaveOccurred())
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		g.Expect(err).NotTo(HaveOccurred())
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr: // Name: "..." of CounterOpts and the like
				if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Name" {
					inSource = append(inSource, stringLit(t, n.Value))
				}
			case *ast.CallExpr: // prometheus.NewDesc("...", ...)
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewDesc" {
					inSource = append(inSource, stringLit(t, n.Args[0]))
				}
			}
			return true
		})
	}
	var listed []string
	for _, m := range defined {
		listed = append(listed, m.name)
	}
	slices.Sort(inSource)
	g.Expect(slices.Compact(slices.Clone(inSource))).To(Equal(inSource), "a name defined twice")
	g.Expect(listed).To(ConsistOf(inSource))
}

func stringLit(t *testing.T, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		t.Fatalf("a metric name that is not a string literal: %#v", e)
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
