package v1alpha1

import (
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// Default values that are not obvious from the field documentation.
const (
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	DefaultRootDir                  = "/var/lib/nodelet"
	DefaultPodLogsDir               = "/var/log/pods"
	DefaultHostRoot                 = "/"
	DefaultMaxPods                  = 110
	DefaultNodeLeaseDurationSeconds = 40
	DefaultClusterDomain            = "cluster.local"
	DefaultResolvConf               = "/etc/resolv.conf"
	DefaultServerAddress            = "0.0.0.0"
	DefaultServerPort               = 10250
	DefaultHealthzBindAddress       = "127.0.0.1:10248"
	// DefaultMetricsBindAddress is off: the kubelet serves /metrics on its
	// node API only, and 127.0.0.1:10249, the old default, is kube-proxy's.
	DefaultMetricsBindAddress = "0"
	DefaultKubeAPIQPS         = 50
	DefaultKubeAPIBurst       = 100
	DefaultRegistryPullQPS    = 5
	DefaultRegistryBurst      = 10
)

// DefaultEvictionHard are the kubelet's hard eviction thresholds.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":  "100Mi",
		"nodefs.available":  "10%",
		"nodefs.inodesFree": "5%",
		"imagefs.available": "15%",
	}
}

// SetDefaults fills every unset field of c with its default. Fields that
// were set are never changed, so it is safe to call more than once.
func SetDefaults(c *NodeletConfiguration) {
	c.APIVersion = GroupVersion.String()
	c.Kind = "NodeletConfiguration"
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
	if c.NodeName == "" {
		c.NodeName = DefaultNodeName()
	}
	setString(&c.ContainerRuntimeEndpoint, DefaultContainerRuntimeEndpoint)
	setString(&c.ImageServiceEndpoint, c.ContainerRuntimeEndpoint)
	setDuration(&c.RuntimeRequestTimeout, 2*time.Minute)
	if c.SerializeImagePulls == nil {
		t := true
		c.SerializeImagePulls = &t
	}
	if c.RegistryPullQPS == nil {
		q := int32(DefaultRegistryPullQPS)
		c.RegistryPullQPS = &q
	}
	if c.RegistryBurst == nil {
		b := int32(DefaultRegistryBurst)
		c.RegistryBurst = &b
	}
	setString(&c.RootDir, DefaultRootDir)
	setString(&c.PodLogsDir, DefaultPodLogsDir)
	setString(&c.HostRoot, DefaultHostRoot)
	if c.MaxPods == 0 {
		c.MaxPods = DefaultMaxPods
	}
	setDuration(&c.NodeStatusUpdateFrequency, 10*time.Second)
	setDuration(&c.NodeStatusReportFrequency, 5*time.Minute)
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = DefaultNodeLeaseDurationSeconds
	}
	setDuration(&c.SyncFrequency, time.Minute)
	setDuration(&c.FileCheckFrequency, 20*time.Second)
	setDuration(&c.HTTPCheckFrequency, 20*time.Second)
	setDuration(&c.RelistPeriod, time.Second)
	if c.EvictionHard == nil {
		c.EvictionHard = DefaultEvictionHard()
	}
	if c.ConfigMapAndSecretChangeDetectionStrategy == "" {
		c.ConfigMapAndSecretChangeDetectionStrategy = WatchChangeDetectionStrategy
	}
	setDuration(&c.ConfigMapAndSecretCacheTTL, time.Minute)
	setString(&c.ClusterDomain, DefaultClusterDomain)
	if c.ResolvConf == nil {
		r := DefaultResolvConf
		c.ResolvConf = &r
	}
	setString(&c.Server.Address, DefaultServerAddress)
	if c.Server.Port == nil {
		p := int32(DefaultServerPort)
		c.Server.Port = &p
	}
	if c.Server.Webhook.Enabled == nil {
		t := true
		c.Server.Webhook.Enabled = &t
	}
	setDurationPtr(&c.Server.Webhook.CacheTTL, 2*time.Minute)
	setString(&c.Server.Authorization.Mode, AuthorizationModeWebhook)
	setDurationPtr(&c.Server.Authorization.CacheAuthorizedTTL, 5*time.Minute)
	setDurationPtr(&c.Server.Authorization.CacheUnauthorizedTTL, 30*time.Second)
	setDuration(&c.Server.IdleTimeout, 2*time.Minute)
	setDuration(&c.StreamingConnectionIdleTimeout, 4*time.Hour)
	setDurationPtr(&c.VolumeStatsAggPeriod, time.Minute)
	setString(&c.HealthzBindAddress, DefaultHealthzBindAddress)
	setString(&c.MetricsBindAddress, DefaultMetricsBindAddress)
	if c.KubeAPIQPS == nil {
		q := float32(DefaultKubeAPIQPS)
		c.KubeAPIQPS = &q
	}
	if c.KubeAPIBurst == 0 {
		c.KubeAPIBurst = DefaultKubeAPIBurst
	}
	if len(c.Controllers) == 0 {
		c.Controllers = []string{"*"}
	}
	setHygieneDefaults(c)
	setMemoryDefaults(c)
}

// DefaultNodeName is NODE_NAME, else the host name, lower-cased as the
// kubelet does.
func DefaultNodeName() string {
	name := os.Getenv("NODE_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	return strings.ToLower(strings.TrimSpace(name))
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setDuration(p *metav1.Duration, v time.Duration) {
	if p.Duration == 0 {
		p.Duration = v
	}
}

// setDurationPtr defaults a duration whose explicit zero means something.
func setDurationPtr(p **metav1.Duration, v time.Duration) {
	if *p == nil {
		*p = &metav1.Duration{Duration: v}
	}
}
