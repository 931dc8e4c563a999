package options

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

const kubeletHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// TestKubeadmConfigAccepted reads the file kubeadm 1.37 writes as
// /var/lib/kubelet/config.yaml and checks what it becomes.
func TestKubeadmConfigAccepted(t *testing.T) {
	opts, err := Parse([]string{"--config=testdata/kubeadm-1.37-config.yaml", "--node-name=n"}, nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(opts.Warnings) != 0 {
		t.Errorf("warnings %q, want none", opts.Warnings)
	}
	c := opts.Config
	got := map[string]any{
		"staticPodPath":            c.StaticPodPath,
		"cgroupDriver":             c.CgroupDriver,
		"clusterDNS":               c.ClusterDNS,
		"clusterDomain":            c.ClusterDomain,
		"clientCAFile":             c.Server.ClientCAFile,
		"anonymous":                c.Server.Anonymous.Enabled,
		"webhook":                  *c.Server.Webhook.Enabled,
		"webhookCacheTTL":          c.Server.Webhook.CacheTTL.Duration,
		"authorizationMode":        c.Server.Authorization.Mode,
		"cacheAuthorizedTTL":       c.Server.Authorization.CacheAuthorizedTTL.Duration,
		"cacheUnauthorizedTTL":     c.Server.Authorization.CacheUnauthorizedTTL.Duration,
		"healthzBindAddress":       c.HealthzBindAddress,
		"rotateCertificates":       *c.RotateCertificates,
		"fileCheckFrequency":       c.FileCheckFrequency.Duration,
		"runtimeRequestTimeout":    c.RuntimeRequestTimeout.Duration,
		"containerRuntimeEndpoint": c.ContainerRuntimeEndpoint,
		"loggingFormat":            c.Logging.Format,
		"loggingVerbosity":         int(c.Logging.Verbosity),
	}
	want := map[string]any{
		"staticPodPath":            "/etc/kubernetes/manifests",
		"cgroupDriver":             "systemd",
		"clusterDNS":               []string{"10.96.0.10"},
		"clusterDomain":            "cluster.local",
		"clientCAFile":             "/etc/kubernetes/pki/ca.crt",
		"anonymous":                false,
		"webhook":                  true,
		"webhookCacheTTL":          2 * time.Minute,
		"authorizationMode":        "Webhook",
		"cacheAuthorizedTTL":       5 * time.Minute,
		"cacheUnauthorizedTTL":     30 * time.Second,
		"healthzBindAddress":       "127.0.0.1:10248",
		"rotateCertificates":       true,
		"fileCheckFrequency":       20 * time.Second,
		"runtimeRequestTimeout":    2 * time.Minute,
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"loggingFormat":            "text",
		"loggingVerbosity":         0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mapped kubeadm config (-want +got):\n%s", diff)
	}
}

// TestKubeletConfigMapping checks fields that land under another name or
// shape.
func TestKubeletConfigMapping(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		check func(t *testing.T, o *Options)
	}{
		{"server", "address: 10.0.0.1\nport: 11250\ntlsCertFile: /c\ntlsPrivateKeyFile: /k\n", func(t *testing.T, o *Options) {
			s := o.Config.Server
			if s.Address != "10.0.0.1" || *s.Port != 11250 || s.TLSCertFile != "/c" || s.TLSPrivateKeyFile != "/k" {
				t.Errorf("server = %+v", s)
			}
		}},
		{"server disabled", "enableServer: false\n", func(t *testing.T, o *Options) {
			if *o.Config.Server.Port != 0 {
				t.Errorf("server.port = %d, want 0", *o.Config.Server.Port)
			}
		}},
		{"healthz port 0 disables", "healthzPort: 0\n", func(t *testing.T, o *Options) {
			if o.Config.HealthzBindAddress != "0" {
				t.Errorf("healthzBindAddress = %q, want 0", o.Config.HealthzBindAddress)
			}
		}},
		{"healthz address alone", "healthzBindAddress: 0.0.0.0\n", func(t *testing.T, o *Options) {
			if o.Config.HealthzBindAddress != "0.0.0.0:10248" {
				t.Errorf("healthzBindAddress = %q", o.Config.HealthzBindAddress)
			}
		}},
		{"rotation off when written false", "rotateCertificates: false\n", func(t *testing.T, o *Options) {
			if o.Config.RotateCertificates == nil || *o.Config.RotateCertificates {
				t.Errorf("rotateCertificates = %v, want false", o.Config.RotateCertificates)
			}
		}},
		{"QPS and log limits", "kubeAPIQPS: 20\nkubeAPIBurst: 40\ncontainerLogMaxFiles: 3\ncontainerLogMaxSize: 5Mi\n", func(t *testing.T, o *Options) {
			c := o.Config
			if *c.KubeAPIQPS != 20 || c.KubeAPIBurst != 40 || c.ContainerLogMaxFiles != 3 || c.ContainerLogMaxSize != "5Mi" {
				t.Errorf("qps %v burst %d files %d size %s", *c.KubeAPIQPS, c.KubeAPIBurst, c.ContainerLogMaxFiles, c.ContainerLogMaxSize)
			}
		}},
		{"eviction, reservations, taints", "evictionHard:\n  memory.available: 200Mi\nsystemReserved:\n  cpu: 100m\nregisterWithTaints:\n- key: k\n  effect: NoSchedule\n", func(t *testing.T, o *Options) {
			c := o.Config
			if c.EvictionHard["memory.available"] != "200Mi" || c.SystemReserved["cpu"] != "100m" ||
				len(c.RegisterWithTaints) != 1 || c.RegisterWithTaints[0].Effect != corev1.TaintEffectNoSchedule {
				t.Errorf("evictionHard %v systemReserved %v taints %v", c.EvictionHard, c.SystemReserved, c.RegisterWithTaints)
			}
		}},
		{"feature gates and provider", "featureGates:\n  ContainerRestartRules: false\nproviderID: aws:///i-1\n", func(t *testing.T, o *Options) {
			if v, ok := o.Config.FeatureGates["ContainerRestartRules"]; !ok || v || o.Config.ProviderID != "aws:///i-1" {
				t.Errorf("featureGates %v providerID %q", o.Config.FeatureGates, o.Config.ProviderID)
			}
		}},
		{"a kubelet's gates nodelet does not implement", "featureGates:\n  RotateKubeletServerCertificate: true\n  DynamicResourceAllocation: true\n  APIServingWithRoutine: true\n", func(t *testing.T, o *Options) {
			if len(o.Warnings) != 1 || !strings.Contains(o.Warnings[0], "APIServingWithRoutine=true") {
				t.Errorf("warnings %q, want one for APIServingWithRoutine, set against its default", o.Warnings)
			}
		}},
		{"seccomp default", "seccompDefault: true\n", func(t *testing.T, o *Options) {
			if !o.Config.SeccompDefault {
				t.Errorf("seccompDefault = false, want true")
			}
		}},
		{"image pull limits", "serializeImagePulls: false\nmaxParallelImagePulls: 3\nregistryPullQPS: 0\nregistryBurst: 20\n", func(t *testing.T, o *Options) {
			c := o.Config
			if *c.SerializeImagePulls || *c.MaxParallelImagePulls != 3 || *c.RegistryPullQPS != 0 || *c.RegistryBurst != 20 {
				t.Errorf("serialize %v parallel %v qps %v burst %v", *c.SerializeImagePulls, c.MaxParallelImagePulls, *c.RegistryPullQPS, *c.RegistryBurst)
			}
		}},
		{"image pull limits at the kubelet's defaults", "registryBurst: 0\n", func(t *testing.T, o *Options) {
			if c := o.Config; *c.RegistryPullQPS != 5 || *c.RegistryBurst != 10 {
				t.Errorf("qps %v burst %v, want 5 and 10", *c.RegistryPullQPS, *c.RegistryBurst)
			}
		}},
		{"logging", "logging:\n  format: json\n  verbosity: 3\n", func(t *testing.T, o *Options) {
			if o.Config.Logging.Format != "json" || o.Config.Logging.Verbosity != 3 {
				t.Errorf("logging = %+v", o.Config.Logging)
			}
		}},
		{"refused fields at the kubelet's default", "cpuManagerPolicy: none\ntopologyManagerScope: container\nreadOnlyPort: 0\nshutdownGracePeriod: 0s\nenableDebuggingHandlers: true\n", func(t *testing.T, o *Options) {}},
		{"ignored fields with any value", "hairpinMode: hairpin-veth\n", func(t *testing.T, o *Options) {}},
		{"swap", "failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n", func(t *testing.T, o *Options) {
			if c := o.Config; c.FailSwapOn == nil || *c.FailSwapOn || c.MemorySwap.SwapBehavior != "LimitedSwap" {
				t.Errorf("failSwapOn %v swapBehavior %q", c.FailSwapOn, c.MemorySwap.SwapBehavior)
			}
		}},
		{"swap at the kubelet's defaults", "memorySwap: {}\n", func(t *testing.T, o *Options) {
			if c := o.Config; !*c.FailSwapOn || c.MemorySwap.SwapBehavior != "NoSwap" {
				t.Errorf("failSwapOn %v swapBehavior %q", *c.FailSwapOn, c.MemorySwap.SwapBehavior)
			}
		}},
		{"memory QoS", "memoryThrottlingFactor: 0.8\nmemoryReservationPolicy: TieredReservation\n", func(t *testing.T, o *Options) {
			if c := o.Config; c.MemoryThrottlingFactor == nil || *c.MemoryThrottlingFactor != 0.8 || c.MemoryReservationPolicy != "TieredReservation" {
				t.Errorf("memoryThrottlingFactor %v memoryReservationPolicy %q", c.MemoryThrottlingFactor, c.MemoryReservationPolicy)
			}
		}},
		{"the previous default factor without MemoryQoS", "memoryThrottlingFactor: 0.9\nfeatureGates:\n  MemoryQoS: false\n", func(t *testing.T, o *Options) {}},
		{"pod CIDR", "podCIDR: 10.244.0.0/24\n", func(t *testing.T, o *Options) {
			if o.Config.PodCIDR != "10.244.0.0/24" {
				t.Errorf("podCIDR = %q, want 10.244.0.0/24", o.Config.PodCIDR)
			}
		}},
		{"volume stats period", "volumeStatsAggPeriod: 5m\n", func(t *testing.T, o *Options) {
			if d := o.Config.VolumeStatsAggPeriod; d == nil || d.Duration != 5*time.Minute {
				t.Errorf("volumeStatsAggPeriod = %v, want 5m", d)
			}
		}},
		{"volume stats period 0 is the kubelet's default", "volumeStatsAggPeriod: 0s\n", func(t *testing.T, o *Options) {
			if d := o.Config.VolumeStatsAggPeriod; d == nil || d.Duration != time.Minute {
				t.Errorf("volumeStatsAggPeriod = %v, want 1m", d)
			}
		}},
		{"volume stats disabled by a negative period", "volumeStatsAggPeriod: -1s\n", func(t *testing.T, o *Options) {
			if d := o.Config.VolumeStatsAggPeriod; d == nil || d.Duration != 0 {
				t.Errorf("volumeStatsAggPeriod = %v, want 0 (disabled)", d)
			}
		}},
		{"graceful node shutdown", "shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\n", func(t *testing.T, o *Options) {
			if c := o.Config; c.ShutdownGracePeriod.Duration != 30*time.Second || c.ShutdownGracePeriodCriticalPods.Duration != 10*time.Second {
				t.Errorf("shutdownGracePeriod %v shutdownGracePeriodCriticalPods %v", c.ShutdownGracePeriod, c.ShutdownGracePeriodCriticalPods)
			}
		}},
		{"graceful node shutdown by pod priority", "shutdownGracePeriodByPodPriority:\n- priority: 100000\n  shutdownGracePeriodSeconds: 20\n- priority: 0\n  shutdownGracePeriodSeconds: 30\n", func(t *testing.T, o *Options) {
			want := []v1alpha1.ShutdownGracePeriodByPodPriority{{Priority: 100000, ShutdownGracePeriodSeconds: 20}, {Priority: 0, ShutdownGracePeriodSeconds: 30}}
			if diff := cmp.Diff(want, o.Config.ShutdownGracePeriodByPodPriority); diff != "" {
				t.Errorf("shutdownGracePeriodByPodPriority (-want +got):\n%s", diff)
			}
		}},
		{"unknown fields warn", "noSuchField: 1\nauthentication:\n  x509:\n    clientCAFile: /ca\n    crlFile: /crl\nStaticPodPath: /m\n", func(t *testing.T, o *Options) {
			all := strings.Join(o.Warnings, "\n")
			for _, want := range []string{`"noSuchField"`, `"authentication.x509.crlFile"`, `"StaticPodPath"`} {
				if !strings.Contains(all, want) {
					t.Errorf("warnings %q do not name %s", o.Warnings, want)
				}
			}
			if o.Config.Server.ClientCAFile != "/ca" || o.Config.StaticPodPath != "" {
				t.Errorf("clientCAFile %q staticPodPath %q: known fields lost or a field matched without its case", o.Config.Server.ClientCAFile, o.Config.StaticPodPath)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse([]string{"--config", writeFile(t, kubeletHeader+tc.body), "--node-name=n"}, nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.check(t, o)
		})
	}
}

// refusedValues holds, for every refused field, a value nodelet cannot
// honour.
var refusedValues = map[string]string{
	"readOnlyPort":                 "10255",
	"tlsCipherSuites":              "[TLS_AES_128_GCM_SHA256]",
	"tlsCurvePreferences":          "[23]",
	"tlsMinVersion":                "VersionTLS13",
	"enableDebuggingHandlers":      "false",
	"enableContentionProfiling":    "true",
	"kubeletCgroups":               "/kubelet",
	"systemCgroups":                "/system",
	"cpuManagerPolicy":             "static",
	"singleProcessOOMKill":         "true",
	"cpuManagerPolicyOptions":      "{full-pcpus-only: \"true\"}",
	"memoryManagerPolicy":          "Static",
	"topologyManagerPolicy":        "single-numa-node",
	"topologyManagerScope":         "pod",
	"topologyManagerPolicyOptions": "{prefer-closest-numa-nodes: \"true\"}",
	"qosReserved":                  "{memory: 50%}",
	"runOnce":                      "true",
	"nodeStatusMaxImages":          "10",
	"maxParallelImagePulls":        "3",
	"mergeDefaultEvictionSettings": "true",
	"podsPerCore":                  "10",
	"enableControllerAttachDetach": "false",
	"protectKernelDefaults":        "true",
	"reservedSystemCPUs":           "\"0\"",
	"showHiddenMetricsForVersion":  "\"1.36\"",
	"defaultPodSysctls":            "{net.ipv4.ping_group_range: 0 0}",
	"kernelMemcgNotification":      "true",
	"enableSystemLogQuery":         "true",
	"reservedMemory":               "[{numaNode: 0, limits: {memory: 1Gi}}]",
	"seccompDefault":               "true",
	"registerNode":                 "false",
	"userNamespaces":               "{idsPerPod: 131072}",
}

func TestKubeletConfigRefusedFields(t *testing.T) {
	for _, f := range kubeletFields {
		if f.support != refused {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			val, ok := refusedValues[f.name]
			if !ok {
				t.Fatalf("no refused value for %s in refusedValues", f.name)
			}
			_, err := Parse([]string{"--config", writeFile(t, kubeletHeader+f.name+": "+val+"\n"), "--node-name=n"}, nil)
			want := `kubelet config field "` + f.name + `"`
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "is not supported by nodelet") {
				t.Fatalf("error = %v, want one naming %s", err, want)
			}
		})
	}
}

// TestKubeletFieldsComplete fails when the kubelet's types have a field
// the table does not say anything about, or the table names a field they
// do not have.
func TestKubeletFieldsComplete(t *testing.T) {
	typ := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	have := map[string]bool{}
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" {
			continue // TypeMeta
		}
		have[name] = true
	}
	listed := map[string]bool{}
	for _, f := range kubeletFields {
		if listed[f.name] {
			t.Errorf("%s listed twice", f.name)
		}
		listed[f.name] = true
		if !have[f.name] {
			t.Errorf("%s is listed but not a KubeletConfiguration field", f.name)
		}
		if f.support != refused && len(f.accepted) > 0 {
			t.Errorf("%s: accepted values only mean something for refused fields", f.name)
		}
	}
	for name := range have {
		if !listed[name] {
			t.Errorf("KubeletConfiguration field %s is not in kubeletFields", name)
		}
	}
}

func TestEmptyJSON(t *testing.T) {
	for in, want := range map[string]bool{
		`null`: true, `""`: true, `0`: true, `"0s"`: true, `[]`: true, `{}`: true,
		`{"a":{"b":"0s"}}`: true, `false`: false, `"x"`: false, `[0]`: false, `{"a":1}`: false, `1`: false,
	} {
		if got := emptyJSON([]byte(in)); got != want {
			t.Errorf("emptyJSON(%s) = %v, want %v", in, got, want)
		}
	}
}
