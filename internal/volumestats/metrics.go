package volumestats

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Volume stats, with the kubelet's names, labels and help texts (all ALPHA
// in the kubelet), for the volumes of PersistentVolumeClaims.
var (
	volumeLabels              = []string{"namespace", "persistentvolumeclaim"}
	volumeStatsCapacityBytes  = prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", volumeLabels, nil)
	volumeStatsAvailableBytes = prometheus.NewDesc("kubelet_volume_stats_available_bytes", "Number of available bytes in the volume", volumeLabels, nil)
	volumeStatsUsedBytes      = prometheus.NewDesc("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", volumeLabels, nil)
	volumeStatsInodes         = prometheus.NewDesc("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", volumeLabels, nil)
	volumeStatsInodesFree     = prometheus.NewDesc("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", volumeLabels, nil)
	volumeStatsInodesUsed     = prometheus.NewDesc("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", volumeLabels, nil)
	volumeStatsHealthAbnormal = prometheus.NewDesc("kubelet_volume_stats_health_status_abnormal",
		"Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy", volumeLabels, nil)
)

// Lister lists the latest measure of the pods' volumes (Calculator).
type Lister interface {
	ListPodVolumeStats() []PodStats
}

// MetricsCollector turns the cached volume stats into the
// kubelet_volume_stats_* gauges at each scrape: one series per claim (a
// claim that several pods mount is reported once), and the health gauge
// only for volumes whose CSI driver reports a volume condition. Volumes
// without a claim are not reported, as the kubelet does not report them.
type MetricsCollector struct {
	mu     sync.Mutex
	lister Lister
}

// Metrics is the process's collector, registered on controller-runtime's
// registry (the one collector nodelet registers outside internal/metrics,
// which would otherwise import this package for its types); it reports
// nothing until SetLister gives it a source.
var Metrics = &MetricsCollector{}

// SetLister sets where the collector reads the volume stats; nil stops it
// reporting.
func (c *MetricsCollector) SetLister(l Lister) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lister = l
}

// Describe sends the descriptors of the volume stats families.
func (c *MetricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{volumeStatsCapacityBytes, volumeStatsAvailableBytes, volumeStatsUsedBytes,
		volumeStatsInodes, volumeStatsInodesFree, volumeStatsInodesUsed, volumeStatsHealthAbnormal} {
		ch <- d
	}
}

// Collect sends the gauges of the claims' volumes, read from the cache.
func (c *MetricsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	l := c.lister
	c.mu.Unlock()
	if l == nil {
		return
	}
	seen := map[[2]string]bool{}
	for _, pod := range l.ListPodVolumeStats() {
		for _, v := range pod.Volumes {
			if v.PVCRef == nil {
				continue
			}
			key := [2]string{v.PVCRef.Namespace, v.PVCRef.Name}
			if seen[key] {
				continue
			}
			seen[key] = true
			gauge := func(d *prometheus.Desc, value *uint64) {
				var f float64
				if value != nil {
					f = float64(*value)
				}
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, f, key[0], key[1])
			}
			gauge(volumeStatsCapacityBytes, v.CapacityBytes)
			gauge(volumeStatsAvailableBytes, v.AvailableBytes)
			gauge(volumeStatsUsedBytes, v.UsedBytes)
			gauge(volumeStatsInodes, v.Inodes)
			gauge(volumeStatsInodesFree, v.InodesFree)
			gauge(volumeStatsInodesUsed, v.InodesUsed)
			if v.Abnormal != nil {
				abnormal := 0.0
				if *v.Abnormal {
					abnormal = 1
				}
				ch <- prometheus.MustNewConstMetric(volumeStatsHealthAbnormal, prometheus.GaugeValue, abnormal, key[0], key[1])
			}
		}
	}
}

func init() {
	ctrlmetrics.Registry.MustRegister(Metrics)
}
