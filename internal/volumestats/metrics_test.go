package volumestats

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/internal/metrics/metricstest"
)

type fakeVolumeLister []PodStats

func (f fakeVolumeLister) ListPodVolumeStats() []PodStats { return f }

func volumeStat(name string, claim *statsapi.PVCReference, abnormal *bool, base uint64) VolumeStats {
	return VolumeStats{
		VolumeStats: statsapi.VolumeStats{Name: name, PVCRef: claim, FsStats: statsapi.FsStats{
			CapacityBytes: ptr.To(base * 10), AvailableBytes: ptr.To(base * 6), UsedBytes: ptr.To(base * 4),
			Inodes: ptr.To(base), InodesFree: ptr.To(base - 3), InodesUsed: ptr.To[uint64](3),
		}},
		Abnormal: abnormal,
	}
}

func TestMetricsCollector(t *testing.T) {
	data := &statsapi.PVCReference{Namespace: "ns", Name: "data"}
	logs := &statsapi.PVCReference{Namespace: "other", Name: "logs"}
	c := &MetricsCollector{}
	c.SetLister(fakeVolumeLister{
		{Namespace: "ns", Name: "a", Volumes: []VolumeStats{
			volumeStat("scratch", nil, nil, 1000), // no claim: not reported
			volumeStat("data", data, nil, 100),
		}},
		{Namespace: "ns", Name: "b", Volumes: []VolumeStats{
			volumeStat("data", data, nil, 999), // the same claim: reported once
		}},
		{Namespace: "other", Name: "c", Volumes: []VolumeStats{
			volumeStat("logs", logs, ptr.To(false), 50),
		}},
	})
	want := `
# HELP kubelet_volume_stats_available_bytes Number of available bytes in the volume
# TYPE kubelet_volume_stats_available_bytes gauge
kubelet_volume_stats_available_bytes{namespace="ns",persistentvolumeclaim="data"} 600
kubelet_volume_stats_available_bytes{namespace="other",persistentvolumeclaim="logs"} 300
# HELP kubelet_volume_stats_capacity_bytes Capacity in bytes of the volume
# TYPE kubelet_volume_stats_capacity_bytes gauge
kubelet_volume_stats_capacity_bytes{namespace="ns",persistentvolumeclaim="data"} 1000
kubelet_volume_stats_capacity_bytes{namespace="other",persistentvolumeclaim="logs"} 500
# HELP kubelet_volume_stats_health_status_abnormal Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy
# TYPE kubelet_volume_stats_health_status_abnormal gauge
kubelet_volume_stats_health_status_abnormal{namespace="other",persistentvolumeclaim="logs"} 0
# HELP kubelet_volume_stats_inodes Maximum number of inodes in the volume
# TYPE kubelet_volume_stats_inodes gauge
kubelet_volume_stats_inodes{namespace="ns",persistentvolumeclaim="data"} 100
kubelet_volume_stats_inodes{namespace="other",persistentvolumeclaim="logs"} 50
# HELP kubelet_volume_stats_inodes_free Number of free inodes in the volume
# TYPE kubelet_volume_stats_inodes_free gauge
kubelet_volume_stats_inodes_free{namespace="ns",persistentvolumeclaim="data"} 97
kubelet_volume_stats_inodes_free{namespace="other",persistentvolumeclaim="logs"} 47
# HELP kubelet_volume_stats_inodes_used Number of used inodes in the volume
# TYPE kubelet_volume_stats_inodes_used gauge
kubelet_volume_stats_inodes_used{namespace="ns",persistentvolumeclaim="data"} 3
kubelet_volume_stats_inodes_used{namespace="other",persistentvolumeclaim="logs"} 3
# HELP kubelet_volume_stats_used_bytes Number of used bytes in the volume
# TYPE kubelet_volume_stats_used_bytes gauge
kubelet_volume_stats_used_bytes{namespace="ns",persistentvolumeclaim="data"} 400
kubelet_volume_stats_used_bytes{namespace="other",persistentvolumeclaim="logs"} 200
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// An abnormal condition reads 1.
	c.SetLister(fakeVolumeLister{{Namespace: "other", Name: "c", Volumes: []VolumeStats{
		volumeStat("logs", logs, ptr.To(true), 50),
	}}})
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP kubelet_volume_stats_health_status_abnormal Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy
# TYPE kubelet_volume_stats_health_status_abnormal gauge
kubelet_volume_stats_health_status_abnormal{namespace="other",persistentvolumeclaim="logs"} 1
`), "kubelet_volume_stats_health_status_abnormal"); err != nil {
		t.Error(err)
	}

	// Without a lister nothing is reported.
	c.SetLister(nil)
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("collected %d series without a lister, want 0", n)
	}
}

func TestVolumeStatsRegistered(t *testing.T) {
	Metrics.SetLister(fakeVolumeLister{{Volumes: []VolumeStats{
		volumeStat("data", &statsapi.PVCReference{Namespace: "ns", Name: "data"}, nil, 1),
	}}})
	defer Metrics.SetLister(nil)
	if n := testutil.CollectAndCount(Metrics, "kubelet_volume_stats_used_bytes"); n != 1 {
		t.Errorf("collected %d used-bytes series, want 1", n)
	}
}

func TestMetricsFamilies(t *testing.T) {
	claim := []string{"namespace", "persistentvolumeclaim"}
	want := map[string][]string{
		"kubelet_volume_stats_capacity_bytes":         claim,
		"kubelet_volume_stats_available_bytes":        claim,
		"kubelet_volume_stats_used_bytes":             claim,
		"kubelet_volume_stats_inodes":                 claim,
		"kubelet_volume_stats_inodes_free":            claim,
		"kubelet_volume_stats_inodes_used":            claim,
		"kubelet_volume_stats_health_status_abnormal": claim,
	}
	if got := metricstest.Described(Metrics); !reflect.DeepEqual(got, want) {
		t.Errorf("described = %v, want %v", got, want)
	}
	err := ctrlmetrics.Registry.Register(Metrics)
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) || already.ExistingCollector != prometheus.Collector(Metrics) {
		t.Errorf("registering again: %v, want already registered by this collector", err)
	}
}
