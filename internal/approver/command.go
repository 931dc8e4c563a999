package approver

import (
	"errors"
	goflag "flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Command is the name of the subcommand that runs the approver.
const Command = "csr-approver"

// commandOptions are the approver's flags.
type commandOptions struct {
	kubeconfig          string
	config              string
	leaderElect         bool
	leaderElectionNS    string
	leaderElectionID    string
	metricsBindAddress  string
	healthProbeBindAddr string
}

// Main runs `nodelet csr-approver` with its arguments (after the
// subcommand's name) until a signal, and returns the exit code: 0 after a
// clean stop or --help, 2 for invalid flags, 1 for any other failure.
func Main(args []string) int {
	var opts commandOptions
	zapOpts := zap.Options{}
	fs := pflag.NewFlagSet("nodelet "+Command, pflag.ContinueOnError)
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig of the approver's identity; empty: the in-cluster ServiceAccount, or $KUBECONFIG")
	fs.StringVar(&opts.config, "config", "", "configuration file (kind "+ConfigurationKind+"): the names a node's serving certificate may hold; empty: no serving certificate is approved")
	fs.BoolVar(&opts.leaderElect, "leader-elect", true, "elect a leader with a Lease, so that only one replica decides")
	fs.StringVar(&opts.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease; empty: the pod's namespace")
	fs.StringVar(&opts.leaderElectionID, "leader-election-id", "nodelet-csr-approver", "name of the leader election Lease")
	fs.StringVar(&opts.metricsBindAddress, "metrics-bind-address", ":8080", "address of the metrics endpoint; 0 turns it off")
	fs.StringVar(&opts.healthProbeBindAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns them off")
	gofs := goflag.NewFlagSet("log", goflag.ContinueOnError)
	zapOpts.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "nodelet %s: %v\n", Command, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "nodelet %s: unexpected arguments %q\n", Command, fs.Args())
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if err := run(opts); err != nil {
		log.Error(err, "CSR approver stopped with an error")
		return 1
	}
	return 0
}

func run(opts commandOptions) error {
	var policy ServingPolicy
	if opts.config != "" {
		c, err := LoadConfiguration(opts.config)
		if err != nil {
			return err
		}
		// Valid: LoadConfiguration checked it.
		policy, _ = c.ServingCertificates.Policy(nil)
	}
	cfg, err := restConfig(opts.kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: opts.metricsBindAddress},
		HealthProbeBindAddress:        opts.healthProbeBindAddr,
		LeaderElection:                opts.leaderElect,
		LeaderElectionNamespace:       opts.leaderElectionNS,
		LeaderElectionID:              opts.leaderElectionID,
		LeaderElectionReleaseOnCancel: true,
		// Every Node is cached, for the addresses other Nodes report
		// (DecideServing), but only what the decisions read of it.
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Node{}: {Transform: nodeAddressesOnly},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Policy: policy}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	ctrl.Log.WithName("setup").Info("Starting the CSR approver", "signers",
		[]string{certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.KubeletServingSignerName},
		"leaderElection", opts.leaderElect, "servingDNSNamePatterns", policy.DNSNamePatterns,
		"servingIPCIDRs", policy.IPCIDRs, "serviceCIDRs", policy.ServiceCIDRs)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// nodeAddressesOnly keeps of a cached Node its name, labels and addresses:
// all the approver reads of it.
func nodeAddressesOnly(o any) (any, error) {
	node, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	return &corev1.Node{
		TypeMeta: node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion,
			Labels: node.Labels, DeletionTimestamp: node.DeletionTimestamp,
		},
		Status: corev1.NodeStatus{Addresses: node.Status.Addresses},
	}, nil
}

// restConfig is the approver's identity: --kubeconfig, else the
// in-cluster ServiceAccount or $KUBECONFIG.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the API server configuration: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
