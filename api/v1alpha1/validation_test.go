package v1alpha1

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func valid() *NodeletConfiguration {
	c := &NodeletConfiguration{NodeName: "node-a"}
	SetDefaults(c)
	return c
}

func TestSetDefaults(t *testing.T) {
	t.Setenv("NODE_NAME", "Node-From-Env")
	c := &NodeletConfiguration{}
	SetDefaults(c)
	checks := []struct {
		field string
		got   any
		want  any
	}{
		{"apiVersion", c.APIVersion, "config.nodelet.io/v1alpha1"},
		{"kind", c.Kind, "NodeletConfiguration"},
		{"nodeName", c.NodeName, "node-from-env"},
		{"containerRuntimeEndpoint", c.ContainerRuntimeEndpoint, DefaultContainerRuntimeEndpoint},
		{"hostRoot", c.HostRoot, "/"},
		{"imageServiceEndpoint", c.ImageServiceEndpoint, DefaultContainerRuntimeEndpoint},
		{"maxPods", c.MaxPods, int32(110)},
		{"nodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency.Duration, 10 * time.Second},
		{"nodeStatusReportFrequency", c.NodeStatusReportFrequency.Duration, 5 * time.Minute},
		{"nodeLeaseDurationSeconds", c.NodeLeaseDurationSeconds, int32(40)},
		{"syncFrequency", c.SyncFrequency.Duration, time.Minute},
		{"relistPeriod", c.RelistPeriod.Duration, time.Second},
		{"runtimeRequestTimeout", c.RuntimeRequestTimeout.Duration, 2 * time.Minute},
		{"serializeImagePulls", *c.SerializeImagePulls, true},
		{"configMapAndSecretChangeDetectionStrategy", c.ConfigMapAndSecretChangeDetectionStrategy, WatchChangeDetectionStrategy},
		{"configMapAndSecretCacheTTL", c.ConfigMapAndSecretCacheTTL.Duration, time.Minute},
		{"clusterDomain", c.ClusterDomain, "cluster.local"},
		{"resolvConf", *c.ResolvConf, "/etc/resolv.conf"},
		{"server.port", *c.Server.Port, int32(10250)},
		{"server.anonymous.enabled", c.Server.Anonymous.Enabled, false},
		{"server.webhook.enabled", *c.Server.Webhook.Enabled, true},
		{"server.webhook.cacheTTL", c.Server.Webhook.CacheTTL.Duration, 2 * time.Minute},
		{"server.authorization.mode", c.Server.Authorization.Mode, "Webhook"},
		{"server.authorization.cacheAuthorizedTTL", c.Server.Authorization.CacheAuthorizedTTL.Duration, 5 * time.Minute},
		{"server.authorization.cacheUnauthorizedTTL", c.Server.Authorization.CacheUnauthorizedTTL.Duration, 30 * time.Second},
		{"evictionHard[memory.available]", c.EvictionHard["memory.available"], "100Mi"},
		{"controllers", strings.Join(c.Controllers, ","), "*"},
		{"kubeAPIQPS", *c.KubeAPIQPS, float32(50)},
		{"kubeAPIBurst", c.KubeAPIBurst, int32(100)},
		{"server.idleTimeout", c.Server.IdleTimeout.Duration, 2 * time.Minute},
		{"streamingConnectionIdleTimeout", c.StreamingConnectionIdleTimeout.Duration, 4 * time.Hour},
		{"serverTLSBootstrap", c.ServerTLSBootstrap, false},
		{"volumeStatsAggPeriod", c.VolumeStatsAggPeriod.Duration, time.Minute},
	}
	for _, tc := range checks {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.field, tc.got, tc.want)
		}
	}
	if errs := Validate(c); len(errs) != 0 {
		t.Fatalf("defaulted configuration is invalid: %v", errs)
	}
}

func TestSetDefaultsKeepsSetFields(t *testing.T) {
	empty := ""
	c := &NodeletConfiguration{
		NodeName:      "x",
		MaxPods:       7,
		ResolvConf:    &empty,
		EvictionHard:  map[string]string{},
		RelistPeriod:  metav1.Duration{Duration: 3 * time.Second},
		ClusterDomain: "corp.example",
		Controllers:   []string{"node"},
	}
	SetDefaults(c)
	if c.MaxPods != 7 || *c.ResolvConf != "" || len(c.EvictionHard) != 0 ||
		c.RelistPeriod.Duration != 3*time.Second || c.ClusterDomain != "corp.example" || c.Controllers[0] != "node" {
		t.Fatalf("SetDefaults changed a field that was set: %+v", c)
	}
}

func TestValidate(t *testing.T) {
	port := int32(70000)
	cases := []struct {
		name      string
		mutate    func(*NodeletConfiguration)
		wantField string // empty: valid
	}{
		{"defaults", func(*NodeletConfiguration) {}, ""},
		{"upper-case node name", func(c *NodeletConfiguration) { c.NodeName = "Node_A" }, "nodeName"},
		{"bad node IP", func(c *NodeletConfiguration) { c.NodeIP = "300.1.1.1" }, "nodeIP"},
		{"ipv6 node IP", func(c *NodeletConfiguration) { c.NodeIP = "fd00::1" }, ""},
		{"pod CIDR", func(c *NodeletConfiguration) { c.PodCIDR = "10.244.1.0/24" }, ""},
		{"dual-stack pod CIDR", func(c *NodeletConfiguration) { c.PodCIDR = "10.244.1.0/24,fd00:1::/64" }, ""},
		{"pod CIDR not a CIDR", func(c *NodeletConfiguration) { c.PodCIDR = "10.244.1.0" }, "podCIDR"},
		{"pod CIDR not a network", func(c *NodeletConfiguration) { c.PodCIDR = "10.244.1.1/24" }, "podCIDR"},
		{"pod CIDR twice IPv4", func(c *NodeletConfiguration) { c.PodCIDR = "10.244.1.0/24,10.245.1.0/24" }, "podCIDR"},
		{"three pod CIDRs", func(c *NodeletConfiguration) { c.PodCIDR = "10.244.1.0/24,fd00::/64,fd01::/64" }, "podCIDR"},
		{"pod CIDR trailing comma", func(c *NodeletConfiguration) { c.PodCIDR = "10.244.1.0/24," }, "podCIDR"},
		{"endpoint without scheme", func(c *NodeletConfiguration) { c.ContainerRuntimeEndpoint = "/run/x.sock" }, "containerRuntimeEndpoint"},
		{"image endpoint bad", func(c *NodeletConfiguration) { c.ImageServiceEndpoint = "http://x" }, "imageServiceEndpoint"},
		{"CIS cipher suites", func(c *NodeletConfiguration) {
			c.Server.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_256_GCM_SHA384"}
		}, ""},
		{"unknown cipher suite", func(c *NodeletConfiguration) { c.Server.TLSCipherSuites = []string{"TLS_RC4"} }, "server.tlsCipherSuites"},
		{"TLS 1.3 minimum", func(c *NodeletConfiguration) { c.Server.TLSMinVersion = "VersionTLS13" }, ""},
		{"unknown TLS version", func(c *NodeletConfiguration) { c.Server.TLSMinVersion = "TLS1.2" }, "server.tlsMinVersion"},
		{"curves", func(c *NodeletConfiguration) { c.Server.TLSCurvePreferences = []int32{23, 29, 4588} }, ""},
		{"unknown curve", func(c *NodeletConfiguration) { c.Server.TLSCurvePreferences = []int32{23, 7} }, "server.tlsCurvePreferences[1]"},
		{"parallel pulls", func(c *NodeletConfiguration) {
			c.SerializeImagePulls = ptr.To(false)
			c.MaxParallelImagePulls = ptr.To[int32](4)
		}, ""},
		{"parallel pulls while serialized", func(c *NodeletConfiguration) { c.MaxParallelImagePulls = ptr.To[int32](4) }, "maxParallelImagePulls"},
		{"no parallel pulls", func(c *NodeletConfiguration) {
			c.SerializeImagePulls = ptr.To(false)
			c.MaxParallelImagePulls = ptr.To[int32](0)
		}, "maxParallelImagePulls"},
		{"negative pull QPS", func(c *NodeletConfiguration) { c.RegistryPullQPS = ptr.To[int32](-1) }, "registryPullQPS"},
		{"verification policy", func(c *NodeletConfiguration) { c.ImagePullCredentialsVerificationPolicy = "AlwaysVerify" }, ""},
		{"unknown verification policy", func(c *NodeletConfiguration) { c.ImagePullCredentialsVerificationPolicy = "Sometimes" }, "imagePullCredentialsVerificationPolicy"},
		{"allowlist", func(c *NodeletConfiguration) {
			c.ImagePullCredentialsVerificationPolicy = "NeverVerifyAllowlistedImages"
			c.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/pause", "registry.example.com/base/*", "localhost:5000/app"}
		}, ""},
		{"allowlist without its policy", func(c *NodeletConfiguration) {
			c.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/pause"}
		}, "preloadedImagesVerificationAllowlist"},
		{"allowlist entry with a tag", func(c *NodeletConfiguration) {
			c.ImagePullCredentialsVerificationPolicy = "NeverVerifyAllowlistedImages"
			c.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/pause", "registry.k8s.io/pause:3.10"}
		}, "preloadedImagesVerificationAllowlist[1]"},
		{"allowlist entry with an inner wildcard", func(c *NodeletConfiguration) {
			c.ImagePullCredentialsVerificationPolicy = "NeverVerifyAllowlistedImages"
			c.PreloadedImagesVerificationAllowlist = []string{"registry.example.com/*/app"}
		}, "preloadedImagesVerificationAllowlist[0]"},
		{"negative pull burst", func(c *NodeletConfiguration) { c.RegistryBurst = ptr.To[int32](-1) }, "registryBurst"},
		{"relative root dir", func(c *NodeletConfiguration) { c.RootDir = "var/lib" }, "rootDir"},
		{"relative logs dir", func(c *NodeletConfiguration) { c.PodLogsDir = "logs" }, "podLogsDir"},
		{"negative max pods", func(c *NodeletConfiguration) { c.MaxPods = -1 }, "maxPods"},
		{"bad label key", func(c *NodeletConfiguration) { c.NodeLabels = map[string]string{"a b": "c"} }, "nodeLabels"},
		{"bad label value", func(c *NodeletConfiguration) { c.NodeLabels = map[string]string{"a": "-x-"} }, "nodeLabels"},
		{"relative host root", func(c *NodeletConfiguration) { c.HostRoot = "host" }, "hostRoot"},
		{"host root", func(c *NodeletConfiguration) { c.HostRoot = "/host" }, ""},
		{"taints", func(c *NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{
				{Key: "nodelet.io/agent", Value: "nodelet", Effect: corev1.TaintEffectNoSchedule},
				{Key: "nodelet.io/agent", Value: "nodelet", Effect: corev1.TaintEffectNoExecute},
			}
		}, ""},
		{"bad taint effect", func(c *NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{{Key: "k", Effect: "Sometimes"}}
		}, "registerWithTaints[0].effect"},
		{"bad taint key", func(c *NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{{Key: "", Effect: "NoSchedule"}}
		}, "registerWithTaints[0].key"},
		{"bad taint value", func(c *NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{{Key: "k", Value: "-v-", Effect: "NoSchedule"}}
		}, "registerWithTaints[0].value"},
		{"taint with time added", func(c *NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{{Key: "k", Effect: "NoExecute", TimeAdded: &metav1.Time{}}}
		}, "registerWithTaints[0].timeAdded"},
		{"duplicate taint", func(c *NodeletConfiguration) {
			c.RegisterWithTaints = []corev1.Taint{{Key: "k", Value: "a", Effect: "NoSchedule"}, {Key: "k", Value: "b", Effect: "NoSchedule"}}
		}, "registerWithTaints[1]"},
		{"unsafe sysctls", func(c *NodeletConfiguration) {
			c.AllowedUnsafeSysctls = []string{"kernel.msg*", "net.core.somaxconn", "kernel/sem", "fs.mqueue.*"}
		}, ""},
		{"sysctl not namespaced", func(c *NodeletConfiguration) {
			c.AllowedUnsafeSysctls = []string{"net.*", "kernel.panic"}
		}, "allowedUnsafeSysctls[1]"},
		{"sysctl glob of everything", func(c *NodeletConfiguration) { c.AllowedUnsafeSysctls = []string{"*"} }, "allowedUnsafeSysctls[0]"},
		{"sysctl glob inside", func(c *NodeletConfiguration) { c.AllowedUnsafeSysctls = []string{"net.*.foo"} }, "allowedUnsafeSysctls[0]"},
		{"restart period too short", func(c *NodeletConfiguration) {
			c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: 500 * time.Millisecond}
		}, "crashLoopBackOff.maxContainerRestartPeriod"},
		{"restart period too long", func(c *NodeletConfiguration) {
			c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: 301 * time.Second}
		}, "crashLoopBackOff.maxContainerRestartPeriod"},
		{"sysctl upper case", func(c *NodeletConfiguration) { c.AllowedUnsafeSysctls = []string{"Kernel.msgmax"} }, "allowedUnsafeSysctls[0]"},
		{"zero relist", func(c *NodeletConfiguration) { c.RelistPeriod.Duration = -1 }, "relistPeriod"},
		{"zero lease", func(c *NodeletConfiguration) { c.NodeLeaseDurationSeconds = -5 }, "nodeLeaseDurationSeconds"},
		{"unknown reserved resource", func(c *NodeletConfiguration) { c.SystemReserved = map[string]string{"gpu": "1"} }, "systemReserved[gpu]"},
		{"bad reserved quantity", func(c *NodeletConfiguration) { c.KubeReserved = map[string]string{"memory": "lots"} }, "kubeReserved[memory]"},
		{"good reserved", func(c *NodeletConfiguration) { c.KubeReserved = map[string]string{"cpu": "100m", "memory": "1Gi"} }, ""},
		{"unknown eviction signal", func(c *NodeletConfiguration) { c.EvictionHard = map[string]string{"cpu.available": "1"} }, "evictionHard[cpu.available]"},
		{"eviction percentage over 100", func(c *NodeletConfiguration) { c.EvictionHard = map[string]string{"nodefs.available": "120%"} }, "evictionHard[nodefs.available]"},
		{"unknown strategy", func(c *NodeletConfiguration) { c.ConfigMapAndSecretChangeDetectionStrategy = "Poll" }, "configMapAndSecretChangeDetectionStrategy"},
		{"cache strategy", func(c *NodeletConfiguration) {
			c.ConfigMapAndSecretChangeDetectionStrategy = CacheChangeDetectionStrategy
		}, ""},
		{"get strategy", func(c *NodeletConfiguration) {
			c.ConfigMapAndSecretChangeDetectionStrategy = GetChangeDetectionStrategy
		}, ""},
		{"negative cache TTL", func(c *NodeletConfiguration) { c.ConfigMapAndSecretCacheTTL.Duration = -time.Second }, "configMapAndSecretCacheTTL"},
		{"cluster DNS", func(c *NodeletConfiguration) { c.ClusterDNS = []string{"10.0.0.10", "dns"} }, "clusterDNS[1]"},
		{"cluster domain", func(c *NodeletConfiguration) { c.ClusterDomain = "Bad_Domain" }, "clusterDomain"},
		{"server port", func(c *NodeletConfiguration) { c.Server.Port = &port }, "server.port"},
		{"server cert without key", func(c *NodeletConfiguration) { c.Server.TLSCertFile = "/c.pem" }, "server.tlsPrivateKeyFile"},
		{"relative client CA", func(c *NodeletConfiguration) { c.Server.ClientCAFile = "ca.pem" }, "server.clientCAFile"},
		{"authorization mode", func(c *NodeletConfiguration) { c.Server.Authorization.Mode = "RBAC" }, "server.authorization.mode"},
		{"negative token cache", func(c *NodeletConfiguration) { c.Server.Webhook.CacheTTL.Duration = -1 }, "server.webhook.cacheTTL"},
		{"anonymous with AlwaysAllow", func(c *NodeletConfiguration) {
			c.Server.Anonymous.Enabled = true
			c.Server.Authorization.Mode = AuthorizationModeAlwaysAllow
		}, "server.anonymous.enabled"},
		{"zero QPS", func(c *NodeletConfiguration) { q := float32(0); c.KubeAPIQPS = &q }, "kubeAPIQPS"},
		{"zero idle timeout", func(c *NodeletConfiguration) { c.Server.IdleTimeout.Duration = 0 }, "server.idleTimeout"},
		{"zero stream idle timeout", func(c *NodeletConfiguration) { c.StreamingConnectionIdleTimeout.Duration = 0 }, "streamingConnectionIdleTimeout"},
		{"negative volume stats period", func(c *NodeletConfiguration) { c.VolumeStatsAggPeriod.Duration = -time.Second }, "volumeStatsAggPeriod"},
		{"volume stats disabled", func(c *NodeletConfiguration) { c.VolumeStatsAggPeriod.Duration = 0 }, ""},
		{"negative deny cache", func(c *NodeletConfiguration) { c.Server.Authorization.CacheUnauthorizedTTL.Duration = -1 }, "server.authorization.cacheUnauthorizedTTL"},
		{"always allow", func(c *NodeletConfiguration) { c.Server.Authorization.Mode = "AlwaysAllow" }, ""},
		{"healthz address", func(c *NodeletConfiguration) { c.HealthzBindAddress = "localhost" }, "healthzBindAddress"},
		{"metrics disabled", func(c *NodeletConfiguration) { c.MetricsBindAddress = "0" }, ""},
		{"negative burst", func(c *NodeletConfiguration) { c.KubeAPIBurst = -1 }, "kubeAPIBurst"},
		{"empty controller", func(c *NodeletConfiguration) { c.Controllers = []string{"-"} }, "controllers[0]"},
		{"static pod path", func(c *NodeletConfiguration) { c.StaticPodPath = "/etc/kubernetes/manifests" }, ""},
		{"relative static pod path", func(c *NodeletConfiguration) { c.StaticPodPath = "manifests" }, "staticPodPath"},
		{"static pod URL", func(c *NodeletConfiguration) {
			c.StaticPodURL = "https://pods.example/node"
			c.StaticPodURLHeader = map[string][]string{"Authorization": {"Bearer x"}}
		}, ""},
		{"static pod URL not http", func(c *NodeletConfiguration) { c.StaticPodURL = "file:///etc/pods" }, "staticPodURL"},
		{"header without URL", func(c *NodeletConfiguration) { c.StaticPodURLHeader = map[string][]string{"A": {"b"}} }, "staticPodURLHeader"},
		{"bad header name", func(c *NodeletConfiguration) {
			c.StaticPodURL = "http://pods.example"
			c.StaticPodURLHeader = map[string][]string{"a b": {"c"}}
		}, "staticPodURLHeader[a b]"},
		{"zero file check", func(c *NodeletConfiguration) { c.FileCheckFrequency.Duration = 0 }, "fileCheckFrequency"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(c)
			errs := Validate(c)
			if tc.wantField == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("want an error for %s, got none", tc.wantField)
			}
			for _, e := range errs {
				if e.Field != tc.wantField {
					t.Fatalf("error names field %q, want %q (%v)", e.Field, tc.wantField, e)
				}
			}
		})
	}
}

func TestZeroCacheTTLsAreKept(t *testing.T) {
	zero := func() *metav1.Duration { return &metav1.Duration{} }
	c := &NodeletConfiguration{NodeName: "x"}
	c.Server.Webhook.CacheTTL = zero()
	c.Server.Authorization.CacheAuthorizedTTL = zero()
	c.Server.Authorization.CacheUnauthorizedTTL = zero()
	SetDefaults(c)
	for name, d := range map[string]*metav1.Duration{
		"webhook.cacheTTL":                   c.Server.Webhook.CacheTTL,
		"authorization.cacheAuthorizedTTL":   c.Server.Authorization.CacheAuthorizedTTL,
		"authorization.cacheUnauthorizedTTL": c.Server.Authorization.CacheUnauthorizedTTL,
	} {
		if d.Duration != 0 {
			t.Errorf("%s: an explicit 0 became %s", name, d.Duration)
		}
	}
	if errs := Validate(c); len(errs) != 0 {
		t.Fatalf("zero cache TTLs are refused: %v", errs)
	}
}
