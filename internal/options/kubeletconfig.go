package options

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// KubeletConfigGroupVersion and KubeletConfigKind name the kubelet's
// configuration file format, which --config also accepts.
const (
	KubeletConfigGroupVersion = "kubelet.config.k8s.io/v1beta1"
	KubeletConfigKind         = "KubeletConfiguration"
)

// kubeletHealthzPort is the kubelet's default healthzPort.
const kubeletHealthzPort = 10248

// DecodeKubelet decodes a KubeletConfiguration document (YAML or JSON) into
// a NodeletConfiguration, as the kubelet reads it: case-sensitively and
// leniently, returning unknown and duplicate fields, at any depth, as
// warnings. A field nodelet cannot honour is an error naming it unless its
// value is empty or the kubelet's default (see kubeletFields).
func DecodeKubelet(data []byte) (*v1alpha1.NodeletConfiguration, []string, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(jsonData, &raw); err != nil {
		return nil, nil, err
	}
	if err := checkKubeletFields(raw); err != nil {
		return nil, nil, err
	}
	kc := &kubeletv1beta1.KubeletConfiguration{}
	strictErrs, err := sigsjson.UnmarshalStrict(jsonData, kc)
	if err != nil {
		return nil, nil, err
	}
	warnings := warnKubeletFields(raw)
	for _, e := range strictErrs {
		warnings = append(warnings, "kubelet config file: "+e.Error())
	}
	_, rotateSet := raw["rotateCertificates"]
	return fromKubelet(kc, rotateSet), warnings, nil
}

// checkKubeletFields refuses, by name, the first refused field whose value
// is neither empty nor accepted. Fields it does not know are left to the
// strict decoding's warnings.
func checkKubeletFields(raw map[string]json.RawMessage) error {
	known := make(map[string]kubeletField, len(kubeletFields))
	for _, f := range kubeletFields {
		known[f.name] = f
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f, ok := known[name]
		if !ok || f.support != refused || emptyJSON(raw[name]) || acceptedJSON(raw[name], f.accepted) {
			continue
		}
		return &refusedFieldError{name: name, value: compactJSON(raw[name]), supported: supportedText(f)}
	}
	return nil
}

// warnKubeletFields returns a warning for each warned field set to a value
// other than empty.
func warnKubeletFields(raw map[string]json.RawMessage) []string {
	var out []string
	for _, f := range kubeletFields {
		v, ok := raw[f.name]
		if !ok || f.support != warned || emptyJSON(v) {
			continue
		}
		out = append(out, fmt.Sprintf("kubelet config field %q: %s is accepted but changes nothing: %s", f.name, compactJSON(v), f.note))
	}
	return out
}

// refusedFieldError is a KubeletConfiguration field nodelet cannot honour.
type refusedFieldError struct {
	name, value, supported string
}

func (e *refusedFieldError) Error() string {
	return fmt.Sprintf("kubelet config field %q: %s is not supported by nodelet (supported: %s)", e.name, e.value, e.supported)
}

// supportedText says which values of a refused field nodelet accepts.
func supportedText(f kubeletField) string {
	if len(f.accepted) == 0 {
		return "unset or empty; " + f.note
	}
	vals := make([]string, len(f.accepted))
	for i, a := range f.accepted {
		vals[i] = strings.Trim(a, `"`)
	}
	return strings.Join(vals, ", ")
}

// emptyJSON reports whether v is null, "", 0, "0s", an empty list, or an
// object whose every member is empty: what the kubelet's defaulting fills
// in, or what kubeadm writes for a field it leaves at its default.
func emptyJSON(v json.RawMessage) bool {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return false
	}
	return emptyValue(x)
}

func emptyValue(x any) bool {
	switch x := x.(type) {
	case nil:
		return true
	case string:
		return x == "" || x == "0s"
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, m := range x {
			if !emptyValue(m) {
				return false
			}
		}
		return true
	}
	return false
}

// acceptedJSON reports whether v equals one of accepted, compared as
// compact JSON.
func acceptedJSON(v json.RawMessage, accepted []string) bool {
	got := compactJSON(v)
	for _, a := range accepted {
		if got == a {
			return true
		}
	}
	return false
}

func compactJSON(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}

// fromKubelet maps the fields nodelet supports. Zero values are left zero,
// for nodelet's defaulting to fill in as the kubelet's would. rotateSet
// says whether rotateCertificates was written, false included.
func fromKubelet(kc *kubeletv1beta1.KubeletConfiguration, rotateSet bool) *v1alpha1.NodeletConfiguration {
	c := &v1alpha1.NodeletConfiguration{}

	c.StaticPodPath = kc.StaticPodPath
	c.PodLogsDir = kc.PodLogsDir
	c.SyncFrequency = kc.SyncFrequency
	c.FileCheckFrequency = kc.FileCheckFrequency
	c.HTTPCheckFrequency = kc.HTTPCheckFrequency
	c.StaticPodURL = kc.StaticPodURL
	c.StaticPodURLHeader = kc.StaticPodURLHeader

	c.Server.Address = kc.Address
	if kc.Port != 0 {
		c.Server.Port = ptrTo(kc.Port)
	}
	if kc.EnableServer != nil && !*kc.EnableServer {
		c.Server.Port = ptrTo(int32(0))
	}
	c.Server.TLSCertFile = kc.TLSCertFile
	c.Server.TLSPrivateKeyFile = kc.TLSPrivateKeyFile
	c.Server.TLSCipherSuites = kc.TLSCipherSuites
	c.Server.ReadOnlyPort = kc.ReadOnlyPort
	c.SeccompDefault = kc.SeccompDefault != nil && *kc.SeccompDefault
	c.ProtectKernelDefaults = kc.ProtectKernelDefaults
	c.Server.TLSMinVersion = kc.TLSMinVersion
	c.Server.TLSCurvePreferences = kc.TLSCurvePreferences
	c.Server.ClientCAFile = kc.Authentication.X509.ClientCAFile
	if kc.Authentication.Anonymous.Enabled != nil {
		c.Server.Anonymous.Enabled = *kc.Authentication.Anonymous.Enabled
	}
	c.Server.Webhook.Enabled = kc.Authentication.Webhook.Enabled
	c.Server.Webhook.CacheTTL = nonZeroDuration(kc.Authentication.Webhook.CacheTTL)
	c.Server.Authorization.Mode = string(kc.Authorization.Mode)
	c.Server.Authorization.CacheAuthorizedTTL = nonZeroDuration(kc.Authorization.Webhook.CacheAuthorizedTTL)
	c.Server.Authorization.CacheUnauthorizedTTL = nonZeroDuration(kc.Authorization.Webhook.CacheUnauthorizedTTL)

	if rotateSet {
		c.RotateCertificates = ptrTo(kc.RotateCertificates)
	}
	c.ServerTLSBootstrap = kc.ServerTLSBootstrap

	c.HealthzBindAddress = healthzAddress(kc.HealthzBindAddress, kc.HealthzPort)

	c.ClusterDomain = kc.ClusterDomain
	c.ClusterDNS = kc.ClusterDNS
	c.ResolvConf = kc.ResolverConfig
	c.StreamingConnectionIdleTimeout = kc.StreamingConnectionIdleTimeout
	c.NodeStatusUpdateFrequency = kc.NodeStatusUpdateFrequency
	c.NodeStatusReportFrequency = kc.NodeStatusReportFrequency
	c.NodeLeaseDurationSeconds = kc.NodeLeaseDurationSeconds

	c.ImageMinimumGCAge = kc.ImageMinimumGCAge
	c.ImageMaximumGCAge = kc.ImageMaximumGCAge
	c.ImageGCHighThresholdPercent = kc.ImageGCHighThresholdPercent
	c.ImageGCLowThresholdPercent = kc.ImageGCLowThresholdPercent
	c.VolumeStatsAggPeriod = volumeStatsAggPeriod(kc.VolumeStatsAggPeriod)

	c.CgroupRoot = kc.CgroupRoot
	c.CgroupsPerQOS = kc.CgroupsPerQOS
	c.CgroupDriver = kc.CgroupDriver
	c.PodPidsLimit = kc.PodPidsLimit
	c.CPUCFSQuota = kc.CPUCFSQuota
	c.Tracing = kc.Tracing
	if kc.CPUCFSQuotaPeriod != nil && kc.CPUCFSQuotaPeriod.Duration != 0 { // 0 is the kubelet's default, 100ms
		c.CPUCFSQuotaPeriod = kc.CPUCFSQuotaPeriod
	}
	c.SystemReserved = kc.SystemReserved
	c.KubeReserved = kc.KubeReserved
	c.SystemReservedCgroup = kc.SystemReservedCgroup
	c.KubeReservedCgroup = kc.KubeReservedCgroup
	c.EnforceNodeAllocatable = kc.EnforceNodeAllocatable
	c.FailSwapOn = kc.FailSwapOn
	c.MemorySwap.SwapBehavior = kc.MemorySwap.SwapBehavior
	c.MemoryThrottlingFactor = kc.MemoryThrottlingFactor
	c.MemoryReservationPolicy = string(kc.MemoryReservationPolicy)

	c.RuntimeRequestTimeout = kc.RuntimeRequestTimeout
	c.ContainerRuntimeEndpoint = kc.ContainerRuntimeEndpoint
	c.ImageServiceEndpoint = kc.ImageServiceEndpoint
	c.SerializeImagePulls = kc.SerializeImagePulls
	c.MaxParallelImagePulls = kc.MaxParallelImagePulls
	c.RegistryPullQPS = kc.RegistryPullQPS
	if kc.RegistryBurst != 0 { // the kubelet's 0 is its default, 10
		c.RegistryBurst = ptrTo(kc.RegistryBurst)
	}
	c.ImagePullCredentialsVerificationPolicy = string(kc.ImagePullCredentialsVerificationPolicy)
	c.PreloadedImagesVerificationAllowlist = kc.PreloadedImagesVerificationAllowlist
	c.MaxPods = kc.MaxPods
	c.PodCIDR = kc.PodCIDR

	if kc.KubeAPIQPS != nil {
		c.KubeAPIQPS = ptrTo(float32(*kc.KubeAPIQPS))
	}
	c.KubeAPIBurst = kc.KubeAPIBurst

	c.EvictionHard = kc.EvictionHard
	c.EvictionSoft = kc.EvictionSoft
	c.EvictionSoftGracePeriod = kc.EvictionSoftGracePeriod
	c.EvictionPressureTransitionPeriod = kc.EvictionPressureTransitionPeriod
	c.EvictionMaxPodGracePeriod = kc.EvictionMaxPodGracePeriod
	c.EvictionMinimumReclaim = kc.EvictionMinimumReclaim
	c.LocalStorageCapacityIsolation = kc.LocalStorageCapacityIsolation

	c.ContainerLogMaxSize = kc.ContainerLogMaxSize
	if kc.ContainerLogMaxFiles != nil {
		c.ContainerLogMaxFiles = *kc.ContainerLogMaxFiles
	}
	if kc.ContainerLogMaxWorkers != nil {
		c.ContainerLogMaxWorkers = *kc.ContainerLogMaxWorkers
	}
	if kc.ContainerLogMonitorInterval != nil {
		c.ContainerLogMonitorInterval = *kc.ContainerLogMonitorInterval
	}

	c.ConfigMapAndSecretChangeDetectionStrategy = v1alpha1.ChangeDetectionStrategy(kc.ConfigMapAndSecretChangeDetectionStrategy)
	c.AllowedUnsafeSysctls = kc.AllowedUnsafeSysctls
	c.RegisterWithTaints = kc.RegisterWithTaints
	c.CrashLoopBackOff.MaxContainerRestartPeriod = kc.CrashLoopBackOff.MaxContainerRestartPeriod
	c.ShutdownGracePeriod = kc.ShutdownGracePeriod
	c.ShutdownGracePeriodCriticalPods = kc.ShutdownGracePeriodCriticalPods
	for _, p := range kc.ShutdownGracePeriodByPodPriority {
		c.ShutdownGracePeriodByPodPriority = append(c.ShutdownGracePeriodByPodPriority, v1alpha1.ShutdownGracePeriodByPodPriority{
			Priority: p.Priority, ShutdownGracePeriodSeconds: p.ShutdownGracePeriodSeconds,
		})
	}
	if kc.EnableProfilingHandler != nil {
		c.EnableProfilingHandler = *kc.EnableProfilingHandler
	}
	c.ProviderID = kc.ProviderID
	c.FeatureGates = kc.FeatureGates
	c.Logging = kc.Logging
	return c
}

// healthzAddress joins the kubelet's healthzBindAddress and healthzPort
// into nodelet's one address: "0" when the port is 0, empty (nodelet's
// default) when neither is set.
func healthzAddress(host string, port *int32) string {
	switch {
	case port != nil && *port == 0:
		return "0"
	case port == nil && host == "":
		return ""
	}
	p := int32(kubeletHealthzPort)
	if port != nil {
		p = *port
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(int(p)))
}

// nonZeroDuration is d, or nil when d is 0: the kubelet defaults a zero
// cache TTL, where nodelet reads 0 as "no cache".
func nonZeroDuration(d metav1.Duration) *metav1.Duration {
	if d.Duration == 0 {
		return nil
	}
	return &d
}

// volumeStatsAggPeriod maps the kubelet's period, where 0 is the default
// and a negative value disables volume stats, to nodelet's, where unset is
// the default and 0 disables them.
func volumeStatsAggPeriod(d metav1.Duration) *metav1.Duration {
	switch {
	case d.Duration == 0:
		return nil
	case d.Duration < 0:
		return &metav1.Duration{}
	}
	return &d
}

func ptrTo[T any](v T) *T { return &v }
