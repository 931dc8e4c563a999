package options

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestKubeletFlags checks that each kubelet flag lands in its field.
func TestKubeletFlags(t *testing.T) {
	cases := []struct {
		flag string
		got  func(o *Options) any
		want any
	}{
		{"--kubeconfig=/etc/kubernetes/kubelet.conf", func(o *Options) any { return o.Kubeconfig }, "/etc/kubernetes/kubelet.conf"},
		{"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", func(o *Options) any { return o.BootstrapKubeconfig }, "/etc/kubernetes/bootstrap-kubelet.conf"},
		{"--container-runtime-endpoint=unix:///run/c.sock", func(o *Options) any { return o.Config.ContainerRuntimeEndpoint }, "unix:///run/c.sock"},
		{"--image-service-endpoint=unix:///run/i.sock", func(o *Options) any { return o.Config.ImageServiceEndpoint }, "unix:///run/i.sock"},
		{"--node-ip=10.0.0.5", func(o *Options) any { return o.Config.NodeIP }, "10.0.0.5"},
		{"--hostname-override=worker-1", func(o *Options) any { return o.Config.NodeName }, "worker-1"},
		{"--pod-infra-container-image=registry.k8s.io/pause:3.10", func(o *Options) any { return o.Config.PodInfraContainerImage }, "registry.k8s.io/pause:3.10"},
		{"--cert-dir=/var/lib/kubelet/pki", func(o *Options) any { return o.CertDir }, "/var/lib/kubelet/pki"},
		{"--root-dir=/var/lib/kubelet", func(o *Options) any { return o.Config.RootDir }, "/var/lib/kubelet"},
		{"--node-labels=a=b,c=d", func(o *Options) any { return o.Config.NodeLabels }, map[string]string{"a": "b", "c": "d"}},
		{"--register-with-taints=k=v:NoSchedule,x:NoExecute", func(o *Options) any { return o.Config.RegisterWithTaints }, []corev1.Taint{
			{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}, {Key: "x", Effect: corev1.TaintEffectNoExecute}}},
		{"--cgroup-driver=systemd", func(o *Options) any { return o.Config.CgroupDriver }, "systemd"},
		{"--cgroup-root=/nodes", func(o *Options) any { return o.Config.CgroupRoot }, "/nodes"},
		{"--max-pods=42", func(o *Options) any { return o.Config.MaxPods }, int32(42)},
		{"--cluster-dns=10.96.0.10,10.96.0.11", func(o *Options) any { return o.Config.ClusterDNS }, []string{"10.96.0.10", "10.96.0.11"}},
		{"--cluster-domain=k.example", func(o *Options) any { return o.Config.ClusterDomain }, "k.example"},
		{"--resolv-conf=", func(o *Options) any { return *o.Config.ResolvConf }, ""},
		{"--resolv-conf=/run/systemd/resolve/resolv.conf", func(o *Options) any { return *o.Config.ResolvConf }, "/run/systemd/resolve/resolv.conf"},
		{"--runtime-request-timeout=30s", func(o *Options) any { return o.Config.RuntimeRequestTimeout.Duration }, 30 * time.Second},
		{"--feature-gates=ContainerRestartRules=false", func(o *Options) any { return o.Config.FeatureGates }, map[string]bool{"ContainerRestartRules": false}},
		{"--pod-manifest-path=/etc/kubernetes/manifests", func(o *Options) any { return o.Config.StaticPodPath }, "/etc/kubernetes/manifests"},
		{"--manifest-url=http://m.example/pods", func(o *Options) any { return o.Config.StaticPodURL }, "http://m.example/pods"},
		{"--provider-id=aws:///i-1", func(o *Options) any { return o.Config.ProviderID }, "aws:///i-1"},
		{"--cloud-provider=external", func(o *Options) any { return o.CloudProvider }, "external"},
		{"--cloud-provider=external --register-with-taints=k=v:NoSchedule", func(o *Options) any { return o.Config.RegisterWithTaints }, []corev1.Taint{
			{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}, {Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		{"--fail-swap-on=false", func(o *Options) any { return *o.Config.FailSwapOn }, false},
		{"--fail-swap-on", func(o *Options) any { return *o.Config.FailSwapOn }, true},
		{"-v=4", func(o *Options) any { return int(o.Config.Logging.Verbosity) }, 4},
		{"--v=2", func(o *Options) any { return int(o.Config.Logging.Verbosity) }, 2},
		{"--vmodule=pod*=3", func(o *Options) any { return len(o.Config.Logging.VModule) }, 1},
		{"--logging-format=json", func(o *Options) any { return o.Config.Logging.Format }, "json"},
		{"--zap-log-level=debug", func(o *Options) any { return int(o.Config.Logging.Verbosity) }, 1},
		{"--client-ca-file=/etc/kubernetes/pki/ca.crt", func(o *Options) any { return o.Config.Server.ClientCAFile }, "/etc/kubernetes/pki/ca.crt"},
		{"--tls-cert-file=/c.crt --tls-private-key-file=/c.key", func(o *Options) any { return o.Config.Server.TLSCertFile + " " + o.Config.Server.TLSPrivateKeyFile }, "/c.crt /c.key"},
		{"--address=127.0.0.2", func(o *Options) any { return o.Config.Server.Address }, "127.0.0.2"},
		{"--port=11250", func(o *Options) any { return *o.Config.Server.Port }, int32(11250)},
		{"--healthz-port=11248", func(o *Options) any { return o.Config.HealthzBindAddress }, "127.0.0.1:11248"},
		{"--healthz-port=0", func(o *Options) any { return o.Config.HealthzBindAddress }, "0"},
		{"--healthz-bind-address=127.0.0.3", func(o *Options) any { return o.Config.HealthzBindAddress }, "127.0.0.3:10248"},
		{"--healthz-bind-address=127.0.0.3:9000", func(o *Options) any { return o.Config.HealthzBindAddress }, "127.0.0.3:9000"},
		{"--container-log-links-dir=/tmp/links", func(o *Options) any { return *o.Config.ContainerLogLinksDir }, "/tmp/links"},
		{"--eviction-hard=memory.available<100Mi,nodefs.available<1%", func(o *Options) any { return o.Config.EvictionHard }, map[string]string{"memory.available": "100Mi", "nodefs.available": "1%"}},
		{"--image-gc-high-threshold=100 --image-gc-low-threshold=90", func(o *Options) any {
			return [2]int32{*o.Config.ImageGCHighThresholdPercent, *o.Config.ImageGCLowThresholdPercent}
		}, [2]int32{100, 90}},
		{"--container-log-links-dir=", func(o *Options) any { return *o.Config.ContainerLogLinksDir }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			args := append([]string{"--node-name=n"}, strings.Fields(tc.flag)...)
			if strings.HasPrefix(tc.flag, "--bootstrap") {
				args = append(args, "--kubeconfig=/k")
			}
			if strings.HasPrefix(tc.flag, "--hostname-override") {
				args = args[1:]
			}
			o, err := Parse(args, nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, tc.got(o)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestManifestURLHeader(t *testing.T) {
	o, err := Parse([]string{"--node-name=n", "--manifest-url=http://m.example/", "--manifest-url-header=A:1,B:2", "--manifest-url-header=A:3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"A": {"1", "3"}, "B": {"2"}}
	if diff := cmp.Diff(want, o.Config.StaticPodURLHeader); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

// TestKubeletFlagsOverrideKubeletFile: flags beat a KubeletConfiguration
// too; feature gates merge one by one.
func TestKubeletFlagsOverrideKubeletFile(t *testing.T) {
	file := writeFile(t, kubeletHeader+`staticPodPath: /etc/kubernetes/manifests
cgroupDriver: systemd
maxPods: 50
featureGates:
  ContainerRestartRules: false
  KubeletCrashLoopBackOffMax: false
logging:
  verbosity: 2
`)
	o, err := Parse([]string{"--config", file, "--node-name=n", "--pod-manifest-path=/m", "--cgroup-driver=cgroupfs",
		"--feature-gates=ContainerRestartRules=true", "-v=5"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	got := map[string]any{"staticPodPath": c.StaticPodPath, "cgroupDriver": c.CgroupDriver, "maxPods": c.MaxPods,
		"featureGates": c.FeatureGates, "verbosity": int(c.Logging.Verbosity)}
	want := map[string]any{"staticPodPath": "/m", "cgroupDriver": "cgroupfs", "maxPods": int32(50),
		"featureGates": map[string]bool{"ContainerRestartRules": true, "KubeletCrashLoopBackOffMax": false}, "verbosity": 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestKubeletFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--cloud-provider=aws"}, "--cloud-provider=aws is not supported"},
		{[]string{"--feature-gates=NoSuchGate=true"}, "NoSuchGate"},
		{[]string{"--feature-gates=UserNamespacesSupport=false"}, "UserNamespacesSupport"},
		{[]string{"--register-with-taints=novalue"}, "taint \"novalue\""},
		{[]string{"--logging-format=xml"}, "xml"},
		{[]string{"--no-such-kubelet-flag"}, "unknown flag: --no-such-kubelet-flag"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			_, err := Parse(append([]string{"--node-name=n"}, tc.args...), nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestFeatureGatesInFileRefusedByName(t *testing.T) {
	_, err := Parse([]string{"--node-name=n", "--config", writeFile(t, header+"featureGates:\n  Imaginary: true\n")}, nil)
	if err == nil || !strings.Contains(err.Error(), "Imaginary") {
		t.Fatalf("error = %v, want one naming Imaginary", err)
	}
}
