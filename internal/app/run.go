package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	ocgroups "github.com/opencontainers/cgroups"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/approver"
	"github.com/nodelet/nodelet/internal/certificates"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/memlimit"
	"github.com/nodelet/nodelet/internal/memprofile"
	"github.com/nodelet/nodelet/internal/nodeapi"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/options"
	"github.com/nodelet/nodelet/internal/residency"
	"github.com/nodelet/nodelet/internal/residency/atinit"
	"github.com/nodelet/nodelet/internal/version"
)

// Run runs nodelet with the command-line arguments args (without the
// program name) and the reconcilers of reg, and returns the process's exit
// code: 0 after a clean stop (or --help, --version), 2 for invalid flags,
// configuration or controller names, 1 for any other failure.
func Run(args []string, reg controller.Registry) int {
	// The same binary runs the CSR approver of nodelet's nodes.
	if len(args) > 0 && args[0] == approver.Command {
		return approver.Main(args[1:])
	}
	opts, err := options.Parse(args, nil)
	if errors.Is(err, options.ErrHelp) {
		return 0
	}
	if errors.Is(err, options.ErrVersion) {
		fmt.Println(version.String())
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		return 2
	}
	cfg := opts.Config
	// An unknown controller name is a configuration error: say so before
	// anything connects anywhere.
	if _, err := reg.Resolve(cfg.Controllers); err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		return 2
	}
	if err := setUpLogging(opts); err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		return 2
	}
	log := ctrl.Log.WithName("setup")
	defer setGCTarget(log).Stop()
	if err := checkSwap(log, cfg); err != nil {
		log.Error(err, "Refusing to start")
		return 1
	}
	if cfg.ProtectKernelDefaults {
		if err := nodeinfo.CheckKernelDefaults("/proc/sys"); err != nil {
			log.Error(err, "Refusing to start")
			return 1
		}
	}
	if err := checkKubeletPaths(cfg); err != nil {
		log.Error(err, "Refusing to start")
		return 1
	}
	// Heap profiles are read only through the profiling handler; without
	// it, nodelet keeps no record of its allocations (package memprofile).
	// A profile lists every mapping of the binary: with the code in
	// chunks (residency.Release) each one would cost megabytes.
	if cfg.EnableProfilingHandler {
		memprofile.Enable()
		if err := residency.JoinCode(); err != nil {
			log.Error(err, "Unable to join the binary's code mapping for profiling")
		}
	}
	// What init and the flag and configuration parsing touched of the
	// binary need not stay resident; again once the caches have synced.
	// (Package atinit released them once already, early in init.)
	if atinit.Err != nil {
		log.Error(atinit.Err, "Unable to release start-up pages of the binary", "after", "early init")
	}
	releaseStartupPages(log, "init")

	ctx := ctrl.SetupSignalHandler()
	// Nothing here waits for the API server: a node may run the API
	// server itself, as a static pod. The client is ready at once (a
	// bootstrap of its certificate, if needed, runs with the local
	// runnables), the manager starts its caches and reconcilers when the
	// API server answers, and the local runnables (the static pod path)
	// start now.
	apiClient, err := loadClient(ctx, opts)
	if err != nil {
		log.Error(err, "Unable to load the API server configuration")
		return 1
	}
	mgr, local, err := newAgent(ctx, apiClient, cfg)
	if err != nil {
		log.Error(err, "Unable to create the manager")
		return 1
	}
	deps, err := buildDeps(ctx, cfg)
	if err != nil {
		log.Error(err, "Unable to set up the node's runtime and state")
		return 1
	}
	deps.Local = local
	if err := reg.Setup(mgr, deps, cfg.Controllers); err != nil {
		log.Error(err, "Unable to set up controllers")
		return 1
	}
	if port := cfg.Server.Port; port == nil || *port != 0 {
		configz, err := agent.ConfigzHandler(cfg)
		if err != nil {
			log.Error(err, "Unable to set up the node API server")
			return 1
		}
		srv, err := nodeapi.NewFromConfig(cfg, mgr, deps.Runtime, configz, deps.VolumeStats())
		if err != nil {
			log.Error(err, "Unable to set up the node API server")
			return 1
		}
		if err := mgr.Add(srv); err != nil {
			log.Error(err, "Unable to add the node API server")
			return 1
		}
	}
	if ro := nodeapi.NewReadOnlyFromConfig(cfg, mgr, deps.Runtime, deps.VolumeStats()); ro != nil {
		if err := mgr.Add(ro); err != nil {
			log.Error(err, "Unable to add the node API's read-only port")
			return 1
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			releaseStartupPages(log, "caches synced")
		}
		return nil
	})); err != nil {
		log.Error(err, "Unable to add the start-up page release")
		return 1
	}
	log.Info("Starting nodelet", "node", cfg.NodeName, "runtime", cfg.ContainerRuntimeEndpoint)
	err = agent.Run(ctx, local, mgr, cfg.NodeName)
	if tp := deps.TracerProvider; tp != nil {
		// The spans batched so far are sent before nodelet exits.
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := tp.Shutdown(flush); err != nil {
			log.Error(err, "Unable to send the last spans")
		}
		cancel()
	}
	if err != nil {
		log.Error(err, "Manager stopped with an error")
		return 1
	}
	return 0
}

// buildDeps connects to the container runtime and opens the state
// directories the reconcilers share.
func buildDeps(ctx context.Context, cfg *v1alpha1.NodeletConfiguration) (*controller.Deps, error) {
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return nil, fmt.Errorf("creating root directory: %w", err)
	}
	store, err := checkpoint.NewFileStore(filepath.Join(cfg.RootDir, "checkpoints"))
	if err != nil {
		return nil, fmt.Errorf("opening checkpoint store: %w", err)
	}
	deps := &controller.Deps{Config: cfg, Checkpoints: store}
	opts := cri.Options{
		NodeName:              cfg.NodeName,
		RuntimeRequestTimeout: cfg.RuntimeRequestTimeout.Duration,
	}
	if cfg.Tracing != nil {
		tp, err := agent.NewTracerProvider(ctx, cfg)
		if err != nil {
			return nil, err
		}
		deps.TracerProvider, opts.TracerProvider = tp, tp
	}
	runtime, err := cri.Dial(ctx, cfg.ContainerRuntimeEndpoint, cfg.ImageServiceEndpoint, opts)
	if err != nil {
		return nil, err
	}
	useRuntimeCgroupDriver(ctx, cfg, runtime)
	deps.Runtime = runtime
	return deps, nil
}

// useRuntimeCgroupDriver sets cfg's cgroup driver to the one the runtime
// reports (CRI RuntimeConfig), as the kubelet has done by default since
// 1.31: pods' cgroups must be named the way the runtime names its
// containers'. A runtime without RuntimeConfig (containerd 1.6) leaves
// the configured driver, and so does one that cannot be asked now.
func useRuntimeCgroupDriver(ctx context.Context, cfg *v1alpha1.NodeletConfiguration, runtime *cri.Client) {
	log := ctrl.Log.WithName("setup")
	driver, err := runtime.CgroupDriver(ctx)
	switch {
	case err != nil:
		log.Error(err, "Unable to read the runtime's cgroup driver, using the configured one", "cgroupDriver", cfg.CgroupDriver)
	case driver == "":
		log.Info("The runtime does not report its cgroup driver, using the configured one", "cgroupDriver", cfg.CgroupDriver)
	case driver != cfg.CgroupDriver:
		log.Info("Using the cgroup driver the runtime reports", "cgroupDriver", driver, "configured", cfg.CgroupDriver)
		cfg.CgroupDriver = driver
	default:
		log.V(1).Info("The runtime reports the configured cgroup driver", "cgroupDriver", driver)
	}
}

// loadClient returns the API server client of --kubeconfig, after a TLS
// bootstrap with --bootstrap-kubeconfig when one is needed, with client
// certificate rotation when rotateCertificates is on. Without
// --kubeconfig it is the usual in-cluster config or $KUBECONFIG.
func loadClient(ctx context.Context, opts *options.Options) (*certificates.Client, error) {
	rotate := ptr.Deref(opts.Config.RotateCertificates, false)
	if opts.Kubeconfig == "" {
		c, err := implicitConfig()
		if err != nil && hasStaticPods(opts.Config) {
			// No API server at all: run the static pods alone.
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if rotate {
			return nil, errors.New("rotateCertificates needs --kubeconfig: the client certificate to rotate is named there")
		}
		return &certificates.Client{Config: c}, nil
	}
	return certificates.Load(ctx, certificates.Options{
		Kubeconfig:          opts.Kubeconfig,
		BootstrapKubeconfig: opts.BootstrapKubeconfig,
		CertDir:             opts.CertDir,
		NodeName:            opts.Config.NodeName,
		Rotate:              rotate,
		Logger:              ctrl.Log.WithName("certificates"),
	})
}

// newAgent returns the manager and the local runnables of the node: with
// no API server configured (apiClient nil), a standalone manager that
// never starts.
func newAgent(ctx context.Context, apiClient *certificates.Client, cfg *v1alpha1.NodeletConfiguration) (ctrl.Manager, *agent.Local, error) {
	local := &agent.Local{}
	if apiClient == nil {
		ctrl.Log.WithName("setup").Info("No API server configured: running the static pods alone", "staticPodPath", cfg.StaticPodPath, "staticPodURL", cfg.StaticPodURL)
		mgr, err := agent.NewStandaloneManager(cfg)
		return mgr, local, err
	}
	if reason := foreignAgent(ctx, apiClient.Config, cfg.NodeName); reason != "" {
		return nil, nil, fmt.Errorf("refusing to run node %s: %s", cfg.NodeName, reason)
	}
	mgr, err := agent.NewManager(apiClient.Config, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := local.Add(apiClient); err != nil {
		return nil, nil, err
	}
	return mgr, local, nil
}

// implicitConfig is the API server of a nodelet given no --kubeconfig:
// $KUBECONFIG, else the in-cluster config of a pod (the DaemonSet). Never
// a user's ~/.kube/config, whose credentials (kubeadm's admin.conf, on a
// control-plane host) are not the node's.
func implicitConfig() (*rest.Config, error) {
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no API server configured (no --kubeconfig, no $KUBECONFIG, not in a pod): %w", err)
	}
	return c, nil
}

// hasStaticPods reports whether the configuration names a static pod
// source, which a node without an API server can run.
func hasStaticPods(cfg *v1alpha1.NodeletConfiguration) bool {
	return cfg.StaticPodPath != "" || cfg.StaticPodURL != ""
}

// foreignAgentTimeout bounds the look for another agent on the node.
const foreignAgentTimeout = 5 * time.Second

// foreignAgent returns why the node must not be run by this nodelet: a
// live agent that is not nodelet (a kubelet) runs it. An error reading the
// Node or its Lease is no reason: the manager reports an unreachable API
// server itself.
func foreignAgent(ctx context.Context, cfg *rest.Config, nodeName string) string {
	// An API server that does not answer soon is no reason either (it may
	// be a static pod of this node).
	ctx, cancel := context.WithTimeout(ctx, foreignAgentTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return ""
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return nodeinfo.ForeignAgent(node, lease, time.Now())
}

// releaseStartupPages drops the binary's pages that start-up made resident
// (package residency); a failure costs memory, not correctness.
func releaseStartupPages(log logr.Logger, after string) {
	advised, err := residency.Release()
	if err != nil {
		log.Error(err, "Unable to release start-up pages of the binary", "after", after)
		return
	}
	log.V(2).Info("Released start-up pages of the binary", "after", after, "mappedBytes", advised)
}

// defaultGCPercent is nodelet's GOGC when the environment sets none: the
// heap may grow by half of what is live before a collection, not the Go
// default's whole. At 110 pods that keeps ~9 MiB less resident at the
// peak for ~5–9% more CPU (docs/benchmarks.md, "Memory").
const defaultGCPercent = 50

// memoryLimitFloor is the lowest soft memory limit nodelet keeps: below it
// a collection would come every few allocations.
const memoryLimitFloor = 16 << 20

// setGCTarget applies defaultGCPercent unless GOGC is set, and keeps a soft
// memory limit the same headroom over what nodelet has live (package
// memlimit), under the environment's GOMEMLIMIT if it sets one. GOGC=off
// or GOMEMLIMIT=off leave the limit to the environment. It returns the
// limit's keeper, nil when there is none.
func setGCTarget(log logr.Logger) *memlimit.Keeper {
	headroom := defaultGCPercent
	if v, set := os.LookupEnv("GOGC"); set {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			// off, or a value the runtime itself refused.
			return nil
		}
		headroom = n
	} else {
		debug.SetGCPercent(defaultGCPercent)
	}
	k := memlimit.Start(memlimit.Options{HeadroomPercent: headroom, Floor: memoryLimitFloor})
	log.V(2).Info("Set the garbage collection target", "gcPercent", headroom, "memoryLimitFollowsLiveMemory", k != nil)
	return k
}

// checkSwap refuses a host with swap on unless failSwapOn is false, and
// LimitedSwap on cgroup v1, as the kubelet does at start.
func checkSwap(log logr.Logger, cfg *v1alpha1.NodeletConfiguration) error {
	on, err := cgroups.HostSwapOn()
	if err != nil {
		return fmt.Errorf("reading whether swap is on: %w", err)
	}
	if err := cgroups.CheckSwap(on, cfg.FailSwapOn == nil || *cfg.FailSwapOn, cfg.MemorySwap.SwapBehavior, ocgroups.IsCgroup2UnifiedMode()); err != nil {
		return err
	}
	if on {
		log.Info("Swap is on", "swapBehavior", cfg.MemorySwap.SwapBehavior)
	}
	return nil
}
