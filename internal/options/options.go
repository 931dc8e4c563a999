package options

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/features"
)

// Options is the parsed command line.
type Options struct {
	// ConfigFile is the path given with --config, if any.
	ConfigFile string
	// Kubeconfig is the path given with --kubeconfig; empty means the
	// in-cluster config or $KUBECONFIG.
	Kubeconfig string
	// BootstrapKubeconfig is --bootstrap-kubeconfig: credentials used only
	// to request a client certificate when Kubeconfig has no valid one.
	BootstrapKubeconfig string
	// CertDir is --cert-dir, where client certificates are kept; defaults
	// to <rootDir>/pki.
	CertDir string
	// Config is the effective, defaulted and validated configuration.
	Config *v1alpha1.NodeletConfiguration
	// Version is --version: print the version and exit.
	Version bool
	// CloudProvider is --cloud-provider: empty or "external", the only
	// values the kubelet still has.
	CloudProvider string
	// HealthzPort is --healthz-port, the port of healthzBindAddress; -1
	// when not given.
	HealthzPort int
	// ConfigDir is --config-dir: the kubelet's drop-ins.
	ConfigDir string
	// Warnings are said once logging is set up: the unknown fields of a
	// KubeletConfiguration, for example.
	Warnings []string
}

// ErrHelp is returned when --help was asked for; the usage has been printed.
var ErrHelp = pflag.ErrHelp

// ErrVersion is returned when --version was asked for, before the
// configuration is read: the caller prints the version and exits.
var ErrVersion = errors.New("version requested")

// Parse reads args (without the program name): the config file named by
// --config first, then every flag that was set on top of it, then defaults,
// then validation. extra, if not nil, is called to add flags of the caller
// (logging, for example) to the flag set.
func Parse(args []string, extra func(*pflag.FlagSet)) (*Options, error) {
	// First pass: only to learn --config and --kubeconfig.
	opts := &Options{HealthzPort: -1}
	overlay := newKubeletOverlay()
	first := newFlagSet(opts, &v1alpha1.NodeletConfiguration{}, overlay, extra)
	if err := first.Parse(args); err != nil {
		return nil, err
	}
	if opts.Version {
		return nil, ErrVersion
	}

	// The configuration: the file, the kubelet's drop-ins and the
	// kubelet's flags for its fields, merged as the kubelet merges them.
	cfg, warnings, err := loadConfigs(opts.ConfigFile, opts.ConfigDir, overlay)
	if err != nil {
		return nil, err
	}
	opts.Warnings = warnings
	// Second pass: nodelet's flags that were set override the file;
	// feature gates given as a flag override the file's one by one.
	fileGates := cfg.FeatureGates
	cfg.FeatureGates = nil
	second := newFlagSet(opts, cfg, newKubeletOverlay(), nil)
	second.ParseErrorsAllowlist.UnknownFlags = true
	if err := second.Parse(args); err != nil {
		return nil, err
	}
	cfg.FeatureGates = mergeGates(fileGates, cfg.FeatureGates)
	if cfg.HealthzBindAddress != "" || opts.HealthzPort >= 0 {
		cfg.HealthzBindAddress = healthzFlags(cmp.Or(cfg.HealthzBindAddress, "127.0.0.1"), opts.HealthzPort)
	}
	if opts.CloudProvider != "" && opts.CloudProvider != "external" {
		return nil, fmt.Errorf("--cloud-provider=%s is not supported: only \"external\" (or none)", opts.CloudProvider)
	}
	if opts.CloudProvider == "external" {
		cfg.RegisterWithTaints = withUninitializedTaint(cfg.RegisterWithTaints)
	}
	if opts.BootstrapKubeconfig != "" {
		if opts.Kubeconfig == "" {
			return nil, errors.New("--bootstrap-kubeconfig needs --kubeconfig: the path the kubeconfig with the issued client certificate is written to")
		}
		// As the kubelet: a bootstrapped certificate is short-lived and
		// rotated unless the configuration says otherwise.
		if cfg.RotateCertificates == nil {
			t := true
			cfg.RotateCertificates = &t
		}
	}
	if err := Complete(cfg); err != nil {
		return nil, err
	}
	opts.Warnings = append(opts.Warnings, features.Unimplemented(cfg.FeatureGates)...)
	if opts.CertDir == "" {
		opts.CertDir = filepath.Join(cfg.RootDir, DefaultCertDirName)
	}
	if !filepath.IsAbs(opts.CertDir) {
		abs, err := filepath.Abs(opts.CertDir)
		if err != nil {
			return nil, fmt.Errorf("--cert-dir: %w", err)
		}
		opts.CertDir = abs
	}
	opts.Config = cfg
	return opts, nil
}

// DefaultCertDirName is the directory under rootDir that --cert-dir
// defaults to.
const DefaultCertDirName = "pki"

// Complete defaults and validates cfg: its fields, its feature gates (an
// unknown gate is an error naming it) and its logging block.
func Complete(cfg *v1alpha1.NodeletConfiguration) error {
	v1alpha1.SetDefaults(cfg)
	errs := v1alpha1.Validate(cfg)
	gate := features.New()
	if err := gate.SetFromMap(cfg.FeatureGates); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("featureGates"), cfg.FeatureGates, err.Error()))
	} else {
		errs = append(errs, v1alpha1.ValidateMemoryQoS(cfg, gate.Enabled(features.MemoryQoS))...)
		errs = append(errs, v1alpha1.ValidateShutdown(cfg, gate.Enabled(features.GracefulNodeShutdown),
			gate.Enabled(features.GracefulNodeShutdownBasedOnPodPriority))...)
		errs = append(errs, logsapi.Validate(&cfg.Logging, gate, field.NewPath("logging"))...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	return nil
}

// mergeGates is file's gates with flag's on top.
func mergeGates(file, flag map[string]bool) map[string]bool {
	if len(flag) == 0 {
		return file
	}
	out := make(map[string]bool, len(file)+len(flag))
	maps.Copy(out, file)
	maps.Copy(out, flag)
	return out
}

var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}()

// Decode decodes a configuration document (YAML or JSON) strictly: it must
// name apiVersion config.nodelet.io/v1alpha1 and kind NodeletConfiguration,
// and every field must be known and appear once.
func Decode(data []byte) (*v1alpha1.NodeletConfiguration, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, fmt.Errorf("apiVersion and kind must be set (apiVersion: %s, kind: NodeletConfiguration)", v1alpha1.GroupVersion)
	}
	cfg := &v1alpha1.NodeletConfiguration{}
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, cfg)
	if err != nil {
		return nil, err
	}
	if gvk.GroupVersion() != v1alpha1.GroupVersion {
		return nil, fmt.Errorf("apiVersion %q is not supported, want %q", gvk.GroupVersion(), v1alpha1.GroupVersion)
	}
	out, ok := obj.(*v1alpha1.NodeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("kind %q is not NodeletConfiguration", gvk.Kind)
	}
	return out, nil
}

// LoadFile reads a configuration file: a NodeletConfiguration, decoded
// strictly, or a KubeletConfiguration, decoded as the kubelet does (see
// DecodeKubelet), which also returns warnings. It does not default or
// validate; Parse and Complete do.
func LoadFile(path string) (*v1alpha1.NodeletConfiguration, []string, error) {
	data, isKubelet, err := readConfigFile(path)
	if err != nil {
		return nil, nil, err
	}
	if isKubelet {
		cfg, warnings, err := DecodeKubelet(data)
		if err != nil {
			return nil, nil, fmt.Errorf("decoding config file %s: %w", path, err)
		}
		return cfg, warnings, nil
	}
	cfg, err := Decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding config file %s: %w", path, err)
	}
	return cfg, nil, nil
}

// readConfigFile reads a configuration file and says whether it is a
// KubeletConfiguration.
func readConfigFile(path string) ([]byte, bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("reading config file: %w", err)
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil, false, errors.New("config file " + path + " is empty")
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, false, fmt.Errorf("decoding config file %s: %w", path, err)
	}
	return data, tm.APIVersion == KubeletConfigGroupVersion && tm.Kind == KubeletConfigKind, nil
}

func newFlagSet(opts *Options, cfg *v1alpha1.NodeletConfiguration, overlay *kubeletOverlay, extra func(*pflag.FlagSet)) *pflag.FlagSet {
	fs := pflag.NewFlagSet("nodelet", pflag.ContinueOnError)
	fs.StringVar(&opts.ConfigFile, "config", opts.ConfigFile, "Path to a NodeletConfiguration or KubeletConfiguration file. Flags that are set override it.")
	fs.StringVar(&opts.ConfigDir, "config-dir", opts.ConfigDir, "Directory of KubeletConfiguration drop-ins (files ending in .conf, in lexical order), merged over --config as the kubelet's.")
	fs.StringVar(&cfg.ImageCredentialProviderConfig, "image-credential-provider-config", cfg.ImageCredentialProviderConfig, "File or directory of the kubelet's CredentialProviderConfig: the image credential provider plugins.")
	fs.StringVar(&cfg.ImageCredentialProviderBinDir, "image-credential-provider-bin-dir", cfg.ImageCredentialProviderBinDir, "Directory of the image credential provider plugins' binaries.")
	fs.BoolVar(&opts.Version, "version", opts.Version, "Print nodelet's version and the Kubernetes version it implements, and exit.")
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", opts.Kubeconfig, "Path to the kubeconfig nodelet authenticates with (as system:node:<name>). With --bootstrap-kubeconfig, written after a TLS bootstrap.")
	fs.StringVar(&opts.BootstrapKubeconfig, "bootstrap-kubeconfig", opts.BootstrapKubeconfig, "Path to a kubeconfig (usually a bootstrap token) used to request a client certificate when --kubeconfig does not exist or its certificate is missing or expired.")
	fs.StringVar(&opts.CertDir, "cert-dir", opts.CertDir, "Directory of the client certificates nodelet requests (default <root-dir>/pki).")

	fs.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "Name of this node (default $NODE_NAME or the host name, lower-cased).")
	fs.StringVar(&cfg.NodeIP, "node-ip", cfg.NodeIP, "InternalIP reported for the node (default: detected).")
	fs.StringVar(&cfg.ContainerRuntimeEndpoint, "container-runtime-endpoint", cfg.ContainerRuntimeEndpoint, "CRI runtime endpoint.")
	fs.StringVar(&cfg.ImageServiceEndpoint, "image-service-endpoint", cfg.ImageServiceEndpoint, "CRI image endpoint (default: the runtime endpoint).")
	fs.StringVar(&cfg.RootDir, "root-dir", cfg.RootDir, "Directory for nodelet's state.")
	fs.StringVar(&cfg.PodLogsDir, "pod-logs-dir", cfg.PodLogsDir, "Directory for container logs.")
	fs.Int32Var(&cfg.MaxPods, "max-pods", cfg.MaxPods, "Number of pods this node runs at most.")
	fs.Var(cliflag.NewMapStringString(&cfg.NodeLabels), "node-labels", "Labels added to the Node at registration, key=value,... (may repeat; empty adds none).")
	fs.StringSliceVar(&cfg.ClusterDNS, "cluster-dns", cfg.ClusterDNS, "DNS server addresses for ClusterFirst pods.")
	fs.StringVar(&cfg.ClusterDomain, "cluster-domain", cfg.ClusterDomain, "Cluster DNS domain.")
	fs.StringVar(&cfg.HealthzBindAddress, "healthz-bind-address", cfg.HealthzBindAddress, "Address of /healthz and /readyz; 0 disables.")
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", cfg.MetricsBindAddress, "Address of /metrics; 0 disables.")
	fs.StringSliceVar(&cfg.Controllers, "controllers", cfg.Controllers, "Reconcilers to run: * for all, name to add one, -name to remove one.")
	fs.DurationVar(&cfg.RuntimeRequestTimeout.Duration, "runtime-request-timeout", cfg.RuntimeRequestTimeout.Duration, "Timeout of CRI calls but image pulls.")
	fs.DurationVar(&cfg.NodeStatusUpdateFrequency.Duration, "node-status-update-frequency", cfg.NodeStatusUpdateFrequency.Duration, "How often the Node status is computed.")
	addKubeletFlags(fs, opts, cfg)
	overlay.addFlags(fs)
	if extra != nil {
		extra(fs)
	}
	return fs
}

// UninitializedTaint is the taint the kubelet registers its Node with under
// --cloud-provider=external, which the cloud controller manager lifts once
// it has initialised the Node.
var UninitializedTaint = corev1.Taint{Key: admission.UninitializedTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// withUninitializedTaint adds UninitializedTaint to taints unless a taint
// of its key and effect is there already.
func withUninitializedTaint(taints []corev1.Taint) []corev1.Taint {
	for _, t := range taints {
		if t.Key == UninitializedTaint.Key && t.Effect == UninitializedTaint.Effect {
			return taints
		}
	}
	return append(taints, UninitializedTaint)
}
