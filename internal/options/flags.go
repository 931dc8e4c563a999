package options

import (
	"fmt"
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
	fs.Var(cliflag.NewMapStringBool(&cfg.FeatureGates), "feature-gates", "Feature gates, A=true,B=false; each overrides the config file's. Known: see docs/configuration.md.")
	fs.StringVar(&cfg.StaticPodPath, "pod-manifest-path", cfg.StaticPodPath, "Directory (or file) of static pod manifests: staticPodPath.")
	fs.StringVar(&cfg.StaticPodURL, "manifest-url", cfg.StaticPodURL, "URL of static pod manifests: staticPodURL.")
	fs.Var(cliflag.NewColonSeparatedMultimapStringString(&cfg.StaticPodURLHeader), "manifest-url-header", "HTTP headers of --manifest-url requests, key:value,key:value; may repeat.")
	fs.StringVar(&cfg.ProviderID, "provider-id", cfg.ProviderID, "Cloud provider's ID of this machine, for the Node's spec.providerID.")
	fs.StringVar(&opts.CloudProvider, "cloud-provider", opts.CloudProvider, `Empty or "external" (a cloud controller manager initialises the Node).`)
	fs.BoolVar(&opts.FailSwapOn, "fail-swap-on", true, "Accepted for the kubelet's command line; nodelet does not check swap.")
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
