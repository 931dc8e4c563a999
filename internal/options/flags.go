package options

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // the json format of --logging-format and logging.format

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// addKubeletFlags adds the kubelet's flags that kubeadm's unit and
// kubeadm-flags.env pass, with the kubelet's names and value syntax, and
// the logging flags of k8s.io/component-base.
func addKubeletFlags(fs *pflag.FlagSet, opts *Options, cfg *v1alpha1.NodeletConfiguration) {
	fs.StringVar(&cfg.NodeName, "hostname-override", cfg.NodeName, "The kubelet's name for --node-name.")
	fs.StringVar(&cfg.PodInfraContainerImage, "pod-infra-container-image", cfg.PodInfraContainerImage, "Sandbox image kept from image garbage collection; the runtime's configuration chooses the image it runs.")
	fs.Var(&taintsValue{&cfg.RegisterWithTaints}, "register-with-taints", "Taints added to the Node at registration: key=value:Effect or key:Effect, comma-separated.")
	fs.StringVar(&cfg.CgroupDriver, "cgroup-driver", cfg.CgroupDriver, "cgroupfs or systemd; must match the runtime's.")
	fs.StringVar(&cfg.CgroupRoot, "cgroup-root", cfg.CgroupRoot, "Cgroup under which pods run.")
	fs.Var(&optionalString{&cfg.ResolvConf}, "resolv-conf", "Resolver file of pods with dnsPolicy Default; empty disables it.")
	fs.Var(cliflag.NewMapStringBool(&cfg.FeatureGates), "feature-gates", "Feature gates, A=true,B=false; each overrides the config file's. Every gate of the kubelet is known; see docs/configuration.md for those nodelet implements.")
	fs.StringVar(&cfg.StaticPodPath, "pod-manifest-path", cfg.StaticPodPath, "Directory (or file) of static pod manifests: staticPodPath.")
	fs.StringVar(&cfg.StaticPodURL, "manifest-url", cfg.StaticPodURL, "URL of static pod manifests: staticPodURL.")
	fs.Var(cliflag.NewColonSeparatedMultimapStringString(&cfg.StaticPodURLHeader), "manifest-url-header", "HTTP headers of --manifest-url requests, key:value,key:value; may repeat.")
	fs.StringVar(&cfg.PodCIDR, "pod-cidr", cfg.PodCIDR, "Pod CIDR(s), comma-separated, handed to the runtime while the Node has no spec.podCIDRs: podCIDR.")
	fs.StringVar(&cfg.ProviderID, "provider-id", cfg.ProviderID, "Cloud provider's ID of this machine, for the Node's spec.providerID.")
	fs.StringVar(&opts.CloudProvider, "cloud-provider", opts.CloudProvider, `Empty or "external" (a cloud controller manager initialises the Node).`)
	fs.Var(&boolPtr{&cfg.FailSwapOn}, "fail-swap-on", "Refuse to start when the node has swap on: failSwapOn (default true).")
	fs.Lookup("fail-swap-on").NoOptDefVal = "true"
	fs.BoolVar(&cfg.SeccompDefault, "seccomp-default", cfg.SeccompDefault, "Run containers without a seccomp profile with the runtime's default one: seccompDefault.")
	fs.Var(&boolPtr{&cfg.SerializeImagePulls}, "serialize-image-pulls", "Pull one image at a time: serializeImagePulls (default true).")
	fs.Lookup("serialize-image-pulls").NoOptDefVal = "true"
	fs.Var(&int32Ptr{&cfg.MaxParallelImagePulls}, "max-parallel-image-pulls", "Most image pulls at once when they are not serialized: maxParallelImagePulls.")
	fs.Var(&int32Ptr{&cfg.RegistryPullQPS}, "registry-qps", "Image pulls per second, 0 for no bound: registryPullQPS (default 5).")
	fs.Var(&int32Ptr{&cfg.RegistryBurst}, "registry-burst", "Image pulls beyond --registry-qps at once: registryBurst (default 10).")
	fs.StringVar(&cfg.Server.ClientCAFile, "client-ca-file", cfg.Server.ClientCAFile, "CA bundle of the client certificates the node API accepts: server.clientCAFile.")
	fs.StringVar(&cfg.Server.TLSCertFile, "tls-cert-file", cfg.Server.TLSCertFile, "Serving certificate of the node API: server.tlsCertFile.")
	fs.StringVar(&cfg.Server.TLSPrivateKeyFile, "tls-private-key-file", cfg.Server.TLSPrivateKeyFile, "Key of --tls-cert-file: server.tlsPrivateKeyFile.")
	fs.StringSliceVar(&cfg.Server.TLSCipherSuites, "tls-cipher-suites", cfg.Server.TLSCipherSuites, "Cipher suites of the node API with TLS 1.2, comma-separated Go names: server.tlsCipherSuites.")
	fs.StringVar(&cfg.Server.TLSMinVersion, "tls-min-version", cfg.Server.TLSMinVersion, "Oldest TLS version of the node API (VersionTLS12, VersionTLS13): server.tlsMinVersion.")
	fs.StringVar(&cfg.Server.Address, "address", cfg.Server.Address, "IP address the node API listens on: server.address.")
	fs.Var(&int32Ptr{&cfg.Server.Port}, "port", "Port of the node API (0 disables it): server.port.")
	fs.IntVar(&opts.HealthzPort, "healthz-port", opts.HealthzPort, "Port of /healthz and /readyz, on the address of --healthz-bind-address (0 disables them; default: that address's port, else 10248).")
	fs.Var(&optionalString{&cfg.ContainerLogLinksDir}, "container-log-links-dir", "Directory of the /var/log/containers links to container logs; empty turns them off: containerLogLinksDir.")
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&cfg.EvictionHard), "eviction-hard", "Hard eviction thresholds, signal<quantity or signal<percent, comma-separated: evictionHard.")
	fs.Var(&int32Ptr{&cfg.ImageGCHighThresholdPercent}, "image-gc-high-threshold", "Disk usage percent above which image GC runs: imageGCHighThresholdPercent.")
	fs.Var(&int32Ptr{&cfg.ImageGCLowThresholdPercent}, "image-gc-low-threshold", "Disk usage percent image GC frees down to: imageGCLowThresholdPercent.")
	logsapi.AddFlags(&cfg.Logging, fs)
	fs.Var(&zapLevel{&cfg.Logging}, "zap-log-level", "Deprecated: use -v. debug is -v=1, info and error -v=0, an integer N -v=N.")
	_ = fs.MarkHidden("zap-log-level")
}

// taintsValue parses the kubelet's --register-with-taints syntax.
type taintsValue struct{ taints *[]corev1.Taint }

func (v *taintsValue) String() string {
	if v.taints == nil {
		return ""
	}
	parts := make([]string, 0, len(*v.taints))
	for _, t := range *v.taints {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}

func (v *taintsValue) Set(s string) error {
	taints, err := parseTaints(s)
	if err != nil {
		return err
	}
	*v.taints = taints
	return nil
}

func (v *taintsValue) Type() string { return "taints" }

// parseTaints parses key=value:Effect and key:Effect, comma-separated.
func parseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kv, effect, ok := strings.Cut(part, ":")
		if !ok || effect == "" {
			return nil, fmt.Errorf("taint %q: want key=value:Effect or key:Effect", part)
		}
		key, value, _ := strings.Cut(kv, "=")
		if key == "" {
			return nil, fmt.Errorf("taint %q: empty key", part)
		}
		out = append(out, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}

// optionalString sets a *string field, empty included.
type optionalString struct{ p **string }

func (v *optionalString) String() string {
	if v.p == nil || *v.p == nil {
		return ""
	}
	return **v.p
}

func (v *optionalString) Set(s string) error {
	*v.p = &s
	return nil
}

func (v *optionalString) Type() string { return "string" }

// zapLevel keeps the --zap-log-level flag of earlier nodelet versions
// working, as a verbosity.
type zapLevel struct{ c *logsapi.LoggingConfiguration }

func (v *zapLevel) String() string { return "" }

func (v *zapLevel) Set(s string) error {
	switch s {
	case "debug":
		v.c.Verbosity = 1
	case "info", "error":
		v.c.Verbosity = 0
	default:
		n, err := strconv.ParseUint(s, 10, 31)
		if err != nil {
			return fmt.Errorf("want debug, info, error or a verbosity: %w", err)
		}
		v.c.Verbosity = logsapi.VerbosityLevel(n)
	}
	return nil
}

func (v *zapLevel) Type() string { return "level" }

// int32Ptr is an optional int32 flag.
type int32Ptr struct{ v **int32 }

func (v *int32Ptr) String() string {
	if v.v == nil || *v.v == nil {
		return ""
	}
	return strconv.Itoa(int(**v.v))
}

func (v *int32Ptr) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return err
	}
	i := int32(n)
	*v.v = &i
	return nil
}

func (v *int32Ptr) Type() string { return "int32" }

// boolPtr is an optional bool flag (with NoOptDefVal "true", --name alone
// is true).
type boolPtr struct{ v **bool }

func (v *boolPtr) String() string {
	if v.v == nil || *v.v == nil {
		return ""
	}
	return strconv.FormatBool(**v.v)
}

func (v *boolPtr) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.v = &b
	return nil
}

func (v *boolPtr) Type() string { return "bool" }

// healthzFlags applies the kubelet's split of the health address to the
// flags: an IP alone in --healthz-bind-address (as the kubelet's flag
// takes it) gets --healthz-port or the kubelet's 10248; --healthz-port
// replaces the port of a host:port; a port of 0 disables the probes.
func healthzFlags(addr string, port int) string {
	if addr == "0" {
		return addr
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		host, p = addr, strconv.Itoa(kubeletHealthzPort)
	}
	if port >= 0 {
		p = strconv.Itoa(port)
	}
	if p == "0" {
		return "0"
	}
	return net.JoinHostPort(host, p)
}
