package controller

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/podcache"
	"github.com/nodelet/nodelet/internal/stats"
	"github.com/nodelet/nodelet/internal/volumestats"
)

// setupVolumeStats adds the volume stats calculator over the pod engine's
// volume manager (CSI volumes measured by their drivers) and the cache's
// pods, unless volumeStatsAggPeriod disables it, and hands it to the
// volume stats metrics. The summaries of the eviction manager and of the
// node API read its cache (Deps.VolumeStats).
func setupVolumeStats(mgr ctrl.Manager, d *Deps, pods podcache.Lister, volumes volumestats.VolumeSource) error {
	cfg := d.Config
	if cfg.VolumeStatsAggPeriod == nil || cfg.VolumeStatsAggPeriod.Duration <= 0 {
		return nil
	}
	calc := &volumestats.Calculator{
		NodeName: cfg.NodeName,
		Pods:     pods,
		Volumes:  volumes,
		CSI:      csi.StatsMeasurer{Drivers: csiDriversFor(d)},
		Period:   cfg.VolumeStatsAggPeriod.Duration,
		Log:      mgr.GetLogger().WithName("volumestats"),
	}
	if err := mgr.Add(calc); err != nil {
		return fmt.Errorf("adding the volume stats calculator: %w", err)
	}
	volumestats.Metrics.SetLister(calc)
	d.volumeStats = calc
	return nil
}

// VolumeStats returns the cache of the pods' volume stats, for the node
// API's summary; nil when the pod controller is not set up or volume stats
// are disabled.
func (d *Deps) VolumeStats() stats.VolumeStatsCache {
	if d.volumeStats == nil {
		return nil
	}
	return d.volumeStats
}
