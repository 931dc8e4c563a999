package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The reason label values of kubelet_image_garbage_collected_total, the
// kubelet's.
const (
	ImageGCReasonAge   = "age"
	ImageGCReasonSpace = "space"
)

// Container and image garbage collection.
var (
	// ImageGarbageCollected counts removed images by why they went.
	ImageGarbageCollected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_image_garbage_collected_total",
		Help: "Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
	}, []string{"reason"})
	// ContainersGarbageCollected counts dead containers removed by
	// container GC (a pod's own sync removing its dead instances is not
	// counted).
	ContainersGarbageCollected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_container_garbage_collected_total",
		Help: "Number of dead containers removed by container garbage collection.",
	})
	// SandboxesGarbageCollected counts dead sandboxes removed by container GC.
	SandboxesGarbageCollected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_sandbox_garbage_collected_total",
		Help: "Number of dead pod sandboxes removed by container garbage collection.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(ImageGarbageCollected, ContainersGarbageCollected, SandboxesGarbageCollected)
}
