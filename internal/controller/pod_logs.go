package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/containerlogs"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/executor"
)

// setupContainerLogs adds the container log manager to mgr: it rotates the
// running containers' logs and sweeps their links every
// containerLogMonitorInterval; exec makes and removes the links as it
// creates and removes containers.
func setupContainerLogs(mgr ctrl.Manager, run Runner, cfg *v1alpha1.NodeletConfiguration, rt cri.Runtime, exec *executor.Executor) error {
	maxSize, err := resource.ParseQuantity(cfg.ContainerLogMaxSize)
	if err != nil {
		return fmt.Errorf("reading containerLogMaxSize: %w", err)
	}
	var linksDir string
	if cfg.ContainerLogLinksDir != nil {
		linksDir = *cfg.ContainerLogLinksDir
	}
	m, err := containerlogs.New(briefLogRuntime{Runtime: rt, list: cri.BriefOf(rt)}, containerlogs.Options{
		PodLogsDir:      cfg.PodLogsDir,
		LinksDir:        linksDir,
		NodeName:        cfg.NodeName,
		MaxSize:         maxSize.Value(),
		MaxFiles:        int(cfg.ContainerLogMaxFiles),
		MaxWorkers:      int(cfg.ContainerLogMaxWorkers),
		MonitorInterval: cfg.ContainerLogMonitorInterval.Duration,
		Logger:          mgr.GetLogger().WithName("containerlogs"),
	})
	if err != nil {
		return err
	}
	// It needs only the runtime: static pods' logs rotate before the API
	// server is reached.
	if err := run.Add(m); err != nil {
		return fmt.Errorf("adding the container log manager: %w", err)
	}
	exec.Logs = m
	return nil
}

// briefLogRuntime lists containers briefly for the log manager, which reads
// only their IDs, states and pod and container names.
type briefLogRuntime struct {
	cri.Runtime
	list cri.BriefLister
}

func (b briefLogRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return b.list.ListContainers(ctx, filter)
}
