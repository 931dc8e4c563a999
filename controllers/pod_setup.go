package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/images"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/volume"
)

// MaxConcurrentPodSyncs is how many pods are synced at once. Pod syncs
// mostly wait on the runtime, so several run side by side.
const MaxConcurrentPodSyncs = 16

// setupPodController wires the pod reconciler: the executor over the
// runtime, image and volume managers, the checkpoint store, and the relister
// whose events enqueue pods whose containers changed.
func setupPodController(mgr ctrl.Manager, d *Deps) error {
	if d.Runtime == nil {
		return errors.New("the pod controller needs a container runtime")
	}
	cfg := d.Config
	store := d.Checkpoints
	if store == nil {
		var err error
		if store, err = checkpoint.NewFileStore(filepath.Join(cfg.RootDir, "checkpoints")); err != nil {
			return fmt.Errorf("opening checkpoint store: %w", err)
		}
	}
	// Admission and host IPs read this node's Node; make sure the cache
	// watches it even when the node controller is disabled.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Node{}); err != nil {
		return fmt.Errorf("watching this node: %w", err)
	}
	objects := apiObjects{c: mgr.GetClient()}
	admit := NewAdmitter(mgr.GetClient(), cfg, func(uid types.UID) bool {
		err := store.GetCheckpoint(checkpointKey(uid), checkpoint.NewData(kuberuntime.PodState{}))
		return err == nil
	})
	volumes, err := volume.New(cfg.RootDir, objects, volume.WithClusterDomain(cfg.ClusterDomain),
		volume.WithNodeAllocatable(func() (corev1.ResourceList, error) {
			_, alloc := admit.NodeFacts(context.Background())
			return alloc, nil
		}))
	if err != nil {
		return err
	}
	recorder := mgr.GetEventRecorderFor("nodelet") //nolint:staticcheck // the core/v1 events kubectl describe shows
	imageManager := images.NewManager(d.Runtime, recorder, images.Options{SerializeImagePulls: *cfg.SerializeImagePulls})
	sandbox := kuberuntime.SandboxOptions{
		PodLogsDir:    cfg.PodLogsDir,
		ClusterDNS:    cfg.ClusterDNS,
		ClusterDomain: cfg.ClusterDomain,
		CgroupParent:  cfg.CgroupRoot,
		ExtraLabels:   cri.OwnerLabels(cfg.NodeName),
	}
	if cfg.ResolvConf != nil && *cfg.ResolvConf != "" {
		if data, err := os.ReadFile(*cfg.ResolvConf); err == nil {
			if rc, err := kuberuntime.ParseResolvConf(string(data)); err == nil {
				sandbox.HostDNS = &rc
			}
		}
	}
	exec := &executor.Executor{
		Runtime:     d.Runtime,
		Images:      imageManager,
		ImageReason: images.Reason,
		Volumes:     volumes,
		Objects:     objects,
		Recorder:    recorder,
		Clock:       clock.RealClock{},
		Sandbox:     sandbox,
		Node: func() executor.NodeFacts {
			ctx := context.Background()
			ips, alloc := admit.NodeFacts(ctx)
			return executor.NodeFacts{HostIPs: ips, Allocatable: alloc}
		},
	}
	relister, err := pleg.New(d.Runtime, pleg.Options{RelistPeriod: cfg.RelistPeriod.Duration})
	if err != nil {
		return err
	}
	if err := mgr.Add(relister); err != nil {
		return fmt.Errorf("adding the relister: %w", err)
	}
	if err := mgr.AddHealthzCheck("pleg", func(*http.Request) error { return relister.Healthy() }); err != nil {
		return fmt.Errorf("adding the relister health check: %w", err)
	}
	probes, err := prober.New(d.Runtime, recorder, prober.Options{})
	if err != nil {
		return err
	}
	if err := mgr.Add(probes); err != nil {
		return fmt.Errorf("adding the prober: %w", err)
	}
	r := &PodReconciler{
		Client:   mgr.GetClient(),
		Exec:     exec,
		Store:    store,
		Recorder: recorder,
		Config:   cfg,
		Clock:    clock.RealClock{},
		Admit:    admit,
		Metrics:  newPodMetrics(mgr.GetClient(), d.Runtime),
		Prober:   probes,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pod").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return !r.ownStatusWrite(e.ObjectNew) },
		})).
		WatchesRawSource(relister.Source()).
		WatchesRawSource(probes.Source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentPodSyncs}).
		Complete(r)
}
