package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/ctrlqueue"
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/images"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/objectstore"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podcache"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/runtimestate"
	"github.com/nodelet/nodelet/internal/staticpod"
	"github.com/nodelet/nodelet/internal/volume"
)

// MaxConcurrentPodSyncs is how many reconciles run at once. A reconcile
// only hands the pod to its pod worker, which does the slow work, so a few
// suffice.
const MaxConcurrentPodSyncs = 4

// setupPodController wires the pod reconciler: the executor over the
// runtime, image and volume managers, the checkpoint store, and the relister
// whose events enqueue pods whose containers changed.
func setupPodController(mgr ctrl.Manager, d *Deps) error {
	if d.Runtime == nil {
		return errors.New("the pod controller needs a container runtime")
	}
	if d.Checkpoints == nil {
		return errors.New("the pod controller needs a checkpoint store")
	}
	cfg, store := d.Config, newPodStates(d.Checkpoints)
	// Admission and host IPs read this node's Node; make sure the cache
	// watches it even when the node controller is disabled.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Node{}); err != nil {
		return fmt.Errorf("watching this node: %w", err)
	}
	// The API server is reached (the static pods' gate opens) once the
	// cache holds the node's pods: static pods then find their mirror pods.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Pod{}); err != nil {
		return fmt.Errorf("watching this node's pods: %w", err)
	}
	// Sandboxes run on their RuntimeClass's handler: read the classes from
	// the cache so that starting a pod asks the API server nothing.
	if _, err := mgr.GetCache().GetInformer(context.Background(), &nodev1.RuntimeClass{}); err != nil {
		return fmt.Errorf("watching RuntimeClasses: %w", err)
	}
	rtFeatures := runtimeFeatures(d.Runtime)
	eng, err := podEngineFor(mgr, d)
	if err != nil {
		return err
	}
	admit := NewAdmitter(mgr.GetClient(), cfg, func(pod *corev1.Pod) (*corev1.Pod, error) {
		return admittedBefore(store, pod)
	})
	admit.APIReady = eng.api.Ready
	if admit.Policy, err = admissionPolicy(cfg, nodeinfo.OSHost{}, admission.SysAppArmor{}); err != nil {
		return err
	}
	admit.LoadedAppArmorProfiles = admission.SysAppArmor{}.Loaded
	admit.RuntimeFeatures = rtFeatures
	providers, err := credentialProviders(mgr, cfg)
	if err != nil {
		return err
	}
	imageOpts := images.Options{
		SerializeImagePulls:   *cfg.SerializeImagePulls,
		MaxParallelImagePulls: int(ptr.Deref(cfg.MaxParallelImagePulls, 0)),
		PullQPS:               float32(ptr.Deref(cfg.RegistryPullQPS, 0)),
		PullBurst:             int(ptr.Deref(cfg.RegistryBurst, 0)),
	}
	if providers != nil { // a nil *Providers in the interface would not be nil
		imageOpts.Providers = providers
	}
	if eng.pullRecords, err = pullRecords(cfg, mgr.GetLogger().WithName("images")); err != nil {
		return err
	}
	imageOpts.Records = eng.pullRecords
	imageManager := images.NewManager(d.Runtime, eng.recorder, imageOpts)
	sandbox := criconfig.SandboxOptions{
		PodLogsDir:    cfg.PodLogsDir,
		ClusterDNS:    cfg.ClusterDNS,
		ClusterDomain: cfg.ClusterDomain,
		CgroupParent:  cfg.CgroupRoot,
		ExtraLabels:   cri.OwnerLabels(cfg.NodeName),
	}
	sandbox.SeccompProfileRoot = filepath.Join(cfg.RootDir, "seccomp")
	sandbox.SeccompDefault = cfg.SeccompDefault
	sandbox.CPUQuota = cpuQuota(cfg)
	if sandbox.HostDNS, err = hostDNS(cfg); err != nil {
		return err
	}
	exec := &executor.Executor{
		Runtime:     d.Runtime,
		Images:      imageManager,
		ImageReason: images.Reason,
		Volumes:     eng.volumes,
		// As the kubelet: a container (re)started after its object was
		// deleted gets CreateContainerConfigError for a required
		// reference, nothing for an optional one, and a pull goes without
		// a deleted pull secret; the last content while the API server is
		// away.
		Objects:    eng.store.ExistingReader(),
		ServiceEnv: staticServiceEnv(eng.services.ServiceEnv, eng.api),
		Recorder:   eng.recorder,
		Clock:      clock.RealClock{},
		Sandbox:    sandbox,
		NodeName:   cfg.NodeName,
		Node:       eng.nodes.Facts,

		RuntimeClasses: runtimeClassReader{reader: mgr.GetClient()},
		Features:       rtFeatures,
		UserNamespaces: userNamespaces(mgr, cfg),
		Gate:           executor.NewStartGate(parallelStarts()),
		Claims:         claimsFor(mgr, d),
	}
	if exec.Resources, err = resourceOptions(cfg); err != nil {
		return err
	}
	if err := setupDevices(mgr, d, admit, exec); err != nil {
		return err
	}
	if err := setupContainerLogs(mgr, d.local(mgr), cfg, d.Runtime, exec); err != nil {
		return err
	}
	relistOpts := pleg.Options{RelistPeriod: cfg.RelistPeriod.Duration}
	if w, ok := d.Runtime.(pleg.ChangeWatcher); ok {
		relistOpts.Changes = w
	}
	relister, err := pleg.New(cri.BriefOf(d.Runtime), relistOpts)
	if err != nil {
		return err
	}
	if err := d.local(mgr).Add(relister); err != nil {
		return fmt.Errorf("adding the relister: %w", err)
	}
	if err := mgr.AddHealthzCheck("pleg", func(*http.Request) error { return relister.Healthy() }); err != nil {
		return fmt.Errorf("adding the relister health check: %w", err)
	}
	probes, err := prober.New(d.Runtime, eng.recorder, prober.Options{})
	if err != nil {
		return err
	}
	if err := d.local(mgr).Add(probes); err != nil {
		return fmt.Errorf("adding the prober: %w", err)
	}
	r := &PodReconciler{
		Client:   mgr.GetClient(),
		Exec:     exec,
		Runtime:  d.Runtime,
		Volumes:  eng.volumes,
		Store:    store,
		Recorder: eng.recorder,
		Config:   cfg,
		Clock:    clock.RealClock{},
		Admit:    admit,
		Nodes:    eng.nodes,
		Objects:  eng.store,
		Services: eng.services,
		Metrics:  newPodMetrics(mgr.GetClient(), d.Runtime),
		Prober:   probes,
		Feed:     eng.pods,
		Pods:     eng.core,
		API:      eng.api,
		Log:      mgr.GetLogger().WithName("pod"),
		Network: runtimestate.NewNetwork(d.Runtime, runtimestate.NetworkOptions{
			Logger: mgr.GetLogger().WithName("runtimestate"),
		}),
		Relisted: relister,
		shared:   podcache.NewShared(mgr.GetCache()),
	}
	workers, err := podworkers.New(podworkers.Options{Sync: tracedSync(d.TracerProvider, r.syncPod), Settled: r.settled, Logger: mgr.GetLogger().WithName("podworkers")})
	if err != nil {
		return err
	}
	if err := d.local(mgr).Add(workers); err != nil {
		return fmt.Errorf("adding the pod workers: %w", err)
	}
	r.Workers = workers
	if err := setupStaticPods(mgr, d, r); err != nil {
		return err
	}
	// Once the API server is reached, static pods make their mirror pods.
	eng.api.OnOpen(r.syncStatics)
	podEvents := []<-chan event.TypedGenericEvent[*corev1.Pod]{probes.Events()}
	if features.Enabled(features.ResourceHealthStatus) {
		updates := resourceUpdatesFor(d, r.Log)
		updates.setKeys(workers.Keys)
		podEvents = append(podEvents, updates.Events())
		devices, claims := d.devices, claimsFor(mgr, d)
		r.ResourceStatus = func(pod *corev1.Pod) map[string][]corev1.ResourceStatus {
			return allocatedResourcesStatus(devices.ResourceStatus(pod), claims.ResourceStatus(pod))
		}
	}
	events := newEventRouter(r, relister.Events(), podEvents...)
	if err := d.local(mgr).Add(events); err != nil {
		return fmt.Errorf("adding the pod event router: %w", err)
	}
	if err := setupVolumeStats(mgr, d, r.shared, eng.volumes); err != nil {
		return err
	}
	if err := setupEviction(mgr, d, r, eng.volumes); err != nil {
		return err
	}
	if err := setupShutdown(mgr, d, r); err != nil {
		return err
	}
	hk := &housekeeper{
		pods:     r.shared,
		cache:    mgr.GetCache(),
		runtime:  cri.BriefOf(r.Runtime),
		dirs:     eng.volumes,
		store:    store,
		logsDir:  cfg.PodLogsDir,
		node:     cfg.NodeName,
		workers:  workers,
		static:   r.Static,
		memory:   r,
		stagings: eng.csi,
		claims:   claimsFor(mgr, d),
		period:   housekeepingPeriod,
		log:      r.Log.WithName("housekeeping"),
	}
	if err := setupPodCgroups(mgr, cfg, exec, hk); err != nil {
		return err
	}
	if err := mgr.Add(hk); err != nil {
		return fmt.Errorf("adding pod housekeeping: %w", err)
	}
	if err := setupGarbageCollection(mgr, d, r); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pod").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return !r.ownStatusWrite(e.ObjectOld, e.ObjectNew) },
		})).
		WatchesRawSource(events.Source()).
		WatchesRawSource(eng.pods.Source()).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: MaxConcurrentPodSyncs,
			// Several agents may share a process (tests, simulations).
			SkipNameValidation: ptr.To(true),
			NewQueue:           ctrlqueue.New,
		}).
		Complete(r)
}

// podEngine is what the pod reconciler shares with the ConfigMap and
// Secret reconcilers: the referenced-object store and the Service watcher
// (runnables of the manager), the volume manager that reads through the
// store, and the feed that enqueues pods in the pod reconciler.
type podEngine struct {
	store    *objectstore.Store
	services *objectstore.ServiceWatcher
	volumes  *volume.Manager
	// csi publishes the pods' CSI volumes, for the volume manager.
	csi      *csi.Publisher
	nodes    nodeinfo.FactsReader
	recorder record.EventRecorder
	pods     *podFeed
	// gc is the node's container and image GC (setupGarbageCollection).
	gc *GarbageCollectors
	// pullRecords are the image pull records, which image GC keeps in line
	// with the runtime's images; nil when the records are off.
	pullRecords *images.PullRecords
	// api opens once the API server has been reached.
	api *apiGate
	// core is a clientset's core/v1 client, for requests whose answer is
	// not read.
	core corev1client.CoreV1Interface
}

// pullRecords opens the image pull records in <rootDir>/image_manager, as
// the kubelet keeps them, unless KubeletEnsureSecretPulledImages is off.
func pullRecords(cfg *v1alpha1.NodeletConfiguration, log logr.Logger) (*images.PullRecords, error) {
	if !features.Enabled(features.KubeletEnsureSecretPulledImages) {
		return nil, nil
	}
	policy, err := images.NewVerificationPolicy(cfg.ImagePullCredentialsVerificationPolicy, cfg.PreloadedImagesVerificationAllowlist)
	if err != nil {
		return nil, fmt.Errorf("imagePullCredentialsVerificationPolicy: %w", err)
	}
	return images.OpenPullRecords(filepath.Join(cfg.RootDir, "image_manager"), policy, log, nil)
}

// staticServiceEnv is the Service environment of pods: a static pod does
// not wait for the API server's Services (the kubelet's rule for static
// pods): before it is reached, or while its Services cannot be read, it
// gets what is known, or none.
func staticServiceEnv(env func(context.Context, *corev1.Pod) (map[string]string, error), api *apiGate) func(context.Context, *corev1.Pod) (map[string]string, error) {
	return func(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
		if !staticpod.IsStatic(pod) {
			return env(ctx, pod)
		}
		if !api.Ready() {
			return map[string]string{}, nil
		}
		ctx, cancel := context.WithTimeout(ctx, staticServiceEnvTimeout)
		defer cancel()
		vars, err := env(ctx, pod)
		if err != nil {
			return map[string]string{}, nil
		}
		return vars, nil
	}
}

// containerd's events tell the relister when to list the runtime.
var _ pleg.ChangeWatcher = (*cri.Client)(nil)

// staticServiceEnvTimeout bounds the wait of a static pod's start for the
// Services of its namespace.
const staticServiceEnvTimeout = 5 * time.Second

// podEngineFor returns d's pod engine, building it and adding its
// runnables to mgr the first time.
func podEngineFor(mgr ctrl.Manager, d *Deps) (*podEngine, error) {
	if d.engine != nil {
		return d.engine, nil
	}
	cfg := d.Config
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating the client of the object store: %w", err)
	}
	logger := mgr.GetLogger().WithName("objectstore")
	store, err := objectstore.New(cs, objectstore.Options{
		Strategy: cfg.ConfigMapAndSecretChangeDetectionStrategy,
		CacheTTL: cfg.ConfigMapAndSecretCacheTTL.Duration,
		Logger:   logger,
	})
	if err != nil {
		return nil, err
	}
	services := objectstore.NewServiceWatcher(cs, 0, logger)
	for _, r := range []manager.Runnable{store, services} {
		if err := mgr.Add(r); err != nil {
			return nil, fmt.Errorf("adding the object store: %w", err)
		}
	}
	api := &apiGate{}
	if err := mgr.Add(api); err != nil {
		return nil, fmt.Errorf("adding the API server gate: %w", err)
	}
	nodes := nodeinfo.FactsReader{Reader: mgr.GetClient(), Config: cfg, Ready: api.Ready}
	tokens := tokenRequester{c: mgr.GetClient()}
	publisher, err := csiPublisher(cfg, cs, d, tokens)
	if err != nil {
		return nil, err
	}
	volumes, err := volume.New(cfg.RootDir, volumeObjects{Reader: store.ExistingReader(), tokens: tokens, claims: cs, node: cfg.NodeName},
		volume.WithCSI(publisher),
		volume.WithPodCertificates(features.Enabled(features.PodCertificateRequest)),
		volume.WithClusterDomain(cfg.ClusterDomain),
		volume.WithHostRoot(cfg.HostRoot),
		volume.WithNodeLabels(nodes.Labels),
		volume.WithNodeAllocatable(func() (corev1.ResourceList, error) {
			facts, err := nodes.Facts(context.Background())
			return facts.Allocatable, err
		}))
	if err != nil {
		return nil, err
	}
	d.engine = &podEngine{
		store:    store,
		services: services,
		volumes:  volumes,
		csi:      publisher,
		nodes:    nodes,
		recorder: mgr.GetEventRecorderFor("nodelet"), //nolint:staticcheck // the core/v1 events kubectl describe shows
		pods:     newPodFeed(),
		api:      api,
		core:     cs.CoreV1(),
	}
	return d.engine, nil
}

// csiPublisher returns the publisher of the pods' CSI volumes: the drivers
// the plugin watcher registers, the CSIDriver, VolumeAttachment and Secret
// objects read with direct GETs (the Node authorizer lets the node read the
// attachments to it and the secrets its volumes name, one by one), tokens
// for the drivers that ask for them, and the volumes-in-use tracker the
// node's status reports.
func csiPublisher(cfg *v1alpha1.NodeletConfiguration, cs kubernetes.Interface, d *Deps, tokens tokenRequester) (*csi.Publisher, error) {
	p, err := csi.NewPublisher(csi.Options{
		RootDir:  cfg.RootDir,
		NodeName: cfg.NodeName,
		Drivers:  csiDriversFor(d),
		CSIDriver: func(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
			return cs.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
		},
		VolumeAttachment: func(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
			return cs.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		},
		Secret: func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
			return cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		ServiceAccountToken: tokens.ServiceAccountToken,
		InUse:               volumesInUseFor(d),
		ResourceExhausted: func(driver string) {
			if r := d.csiAllocatable; r != nil {
				r.ResourceExhausted(driver)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the CSI volume publisher: %w", err)
	}
	return p, nil
}

// admittedBefore returns the pod as an earlier run of the agent admitted
// it, with the resources allocated to it, or nil when none did. A pod with
// a checkpoint was admitted (a corrupt or newer checkpoint counts: the pod
// ran, with resources nodelet cannot read; its spec's are taken); so was
// a pod with a start time, whose checkpoint may have been removed.
func admittedBefore(store checkpoint.Manager, pod *corev1.Pod) (*corev1.Pod, error) {
	data := checkpoint.NewData(state.NewPodState(pod.UID))
	err := store.GetCheckpoint(checkpointKey(pod.UID), data)
	switch {
	case err == nil:
		return state.AllocatedPod(pod, data.Value), nil
	case errors.Is(err, checkpoint.ErrCorruptCheckpoint), errors.Is(err, checkpoint.ErrUnsupportedVersion):
		return pod, nil
	case errors.Is(err, checkpoint.ErrCheckpointNotFound):
		if pod.Status.StartTime != nil {
			return pod, nil
		}
		return nil, nil
	}
	return nil, err
}

// runtimeFeatures returns the runtime's features, read once and refreshed
// now and then; a runtime that cannot report them has none.
func runtimeFeatures(rt cri.Runtime) *cri.FeatureCache {
	src, ok := rt.(cri.FeatureSource)
	if !ok {
		return cri.NewFeatureCache(nil)
	}
	return cri.NewFeatureCache(src)
}

// userNamespaces returns the allocator of pods' user namespace IDs, the
// kubelet's default range, recorded under the root directory. One that
// cannot read its records gives none: pods asking for a user namespace are
// refused rather than given a range a running pod may hold.
func userNamespaces(mgr ctrl.Manager, cfg *v1alpha1.NodeletConfiguration) executor.UserNamespaceAllocator {
	u, err := executor.NewUserNamespaces(filepath.Join(cfg.RootDir, "userns"),
		executor.DefaultUserNamespaceFirstID, executor.DefaultUserNamespaceLength)
	if err != nil {
		mgr.GetLogger().Error(err, "Unable to read the user namespaces of pods, refusing pods that ask for one")
		return nil
	}
	return u
}

// runtimeClassReader reads RuntimeClasses from the manager's cache.
type runtimeClassReader struct{ reader client.Reader }

func (r runtimeClassReader) RuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	rc := &nodev1.RuntimeClass{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: name}, rc); err != nil {
		return nil, err
	}
	return rc, nil
}

// hostDNS reads the resolver configuration that dnsPolicy Default pods get
// (resolvConf). An empty resolvConf means none; a file that cannot be read
// or parsed is a configuration error, as it is for the kubelet.
func hostDNS(cfg *v1alpha1.NodeletConfiguration) (*criconfig.ResolvConf, error) {
	if cfg.ResolvConf == nil || *cfg.ResolvConf == "" {
		return nil, nil
	}
	data, err := os.ReadFile(*cfg.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("reading resolvConf: %w", err)
	}
	rc, err := criconfig.ParseResolvConf(string(data))
	if err != nil {
		return nil, fmt.Errorf("parsing resolvConf %s: %w", *cfg.ResolvConf, err)
	}
	return &rc, nil
}

// parallelStarts is how many runtime calls that start pods run at once:
// enough to keep the runtime busy, few enough that a burst's first pods are
// Ready early. On two cores, 110 pods were all Ready soonest between 4 and
// 8 at once; 2 left the runtime idle and no bound started every pod late.
func parallelStarts() int {
	return 3 * runtime.NumCPU()
}
