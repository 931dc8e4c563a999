package criconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

func TestParseResolvConf(t *testing.T) {
	got, err := ParseResolvConf(`# generated
nameserver 10.0.0.1
search old.example
nameserver 10.0.0.2
search corp.example. . example.com
options ndots:2 timeout:1
options ndots:3 rotate
`)
	if err != nil {
		t.Fatalf("ParseResolvConf: %v", err)
	}
	want := ResolvConf{
		Servers:  []string{"10.0.0.1", "10.0.0.2"},
		Searches: []string{"corp.example", "example.com"},
		Options:  []string{"ndots:3", "timeout:1", "rotate"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolv.conf (-want +got):\n%s", diff)
	}
	if _, err := ParseResolvConf("nameserver\n"); err == nil {
		t.Error("a nameserver line without address parsed")
	}
}

func TestPodDNSConfig(t *testing.T) {
	host := &ResolvConf{Servers: []string{"1.1.1.1"}, Searches: []string{"corp.example"}, Options: []string{"timeout:1"}}
	cluster := SandboxOptions{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", HostDNS: host}
	clusterSearch := []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}
	dnsPolicy := func(p v1.DNSPolicy, hostNet bool) podtest.Option {
		return func(pod *v1.Pod) { pod.Spec.DNSPolicy, pod.Spec.HostNetwork = p, hostNet }
	}
	long := strings.Repeat("a", 250)
	tests := []struct {
		name string
		pod  *v1.Pod
		opts SandboxOptions
		want *runtimeapi.DNSConfig
	}{
		{"ClusterFirst", podtest.NewPod(dnsPolicy(v1.DNSClusterFirst, false)), cluster,
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{"ClusterFirst on the host network uses the node's", podtest.NewPod(dnsPolicy(v1.DNSClusterFirst, true)), cluster,
			&runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"corp.example"}, Options: []string{"timeout:1"}}},
		{"ClusterFirstWithHostNet", podtest.NewPod(dnsPolicy(v1.DNSClusterFirstWithHostNet, true)), cluster,
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{"ClusterFirst without cluster DNS falls back to Default", podtest.NewPod(dnsPolicy(v1.DNSClusterFirst, false)), SandboxOptions{HostDNS: host},
			&runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"corp.example"}, Options: []string{"timeout:1"}}},
		{"Default without a node resolv.conf", podtest.NewPod(dnsPolicy(v1.DNSDefault, false)), SandboxOptions{},
			&runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}},
		{"None takes only dnsConfig", podtest.NewPod(dnsPolicy(v1.DNSNone, false), func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"8.8.8.8"}, Searches: []string{"my.dns"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}
		}), cluster,
			&runtimeapi.DNSConfig{Servers: []string{"8.8.8.8"}, Searches: []string{"my.dns"}, Options: []string{"ndots:2", "edns0"}}},
		{"dnsConfig is merged into ClusterFirst", podtest.NewPod(dnsPolicy(v1.DNSClusterFirst, false), func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "8.8.8.8"}, Searches: []string{"cluster.local", "x.y"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}}}
		}), cluster,
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "8.8.8.8"}, Searches: append(clusterSearch, "x.y"), Options: []string{"ndots:1"}}},
		{"limits drop extra servers and overlong search lines", podtest.NewPod(dnsPolicy(v1.DNSNone, false), func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.0.0.1", "1.0.0.2", "1.0.0.3", "1.0.0.4"},
				Searches: []string{long + "1", long + "2", long + "3", long + "4", long + "5", long + "6", long + "7", long + "8", long + "9"}}
		}), cluster,
			&runtimeapi.DNSConfig{Servers: []string{"1.0.0.1", "1.0.0.2", "1.0.0.3"},
				Searches: []string{long + "1", long + "2", long + "3", long + "4", long + "5", long + "6", long + "7", long + "8"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodDNSConfig(tt.pod, tt.opts)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("DNS config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSandboxConfig(t *testing.T) {
	pod := podtest.NewPod(func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Annotations = map[string]string{"note": "x"}
		p.Spec.HostIPC = true
		p.Spec.ShareProcessNamespace = ptr.To(true)
		p.Spec.SecurityContext = &v1.PodSecurityContext{
			RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), FSGroup: ptr.To[int64](2000),
			SupplementalGroups: []int64{4000}, Sysctls: []v1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}},
		}
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}}
		p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	})
	got, err := SandboxConfig(pod, SandboxOptions{Attempt: 2, PodLogsDir: "/var/log/pods", CgroupParent: "/kubepods/pod1",
		ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ExtraLabels: map[string]string{"nodelet.io/node": "n1"}})
	if err != nil {
		t.Fatalf("SandboxConfig: %v", err)
	}
	want := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1", Attempt: 2},
		Hostname:     "web",
		LogDirectory: "/var/log/pods/default_web_uid-1",
		DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
			Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}},
		PortMappings: []*runtimeapi.PortMapping{
			{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080},
			{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53},
		},
		Labels: map[string]string{"app": "web", "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default",
			"io.kubernetes.pod.uid": "uid-1", "nodelet.io/node": "n1"},
		Annotations: map[string]string{"note": "x"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/pod1",
			Sysctls:      map[string]string{"net.core.somaxconn": "1024"},
			Resources:    &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000},
			Overhead:     &runtimeapi.LinuxContainerResources{},
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions:   &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_NODE},
				Privileged:         true,
				RunAsUser:          &runtimeapi.Int64Value{Value: 1000},
				RunAsGroup:         &runtimeapi.Int64Value{Value: 3000},
				SupplementalGroups: []int64{2000, 4000},
				Seccomp:            &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("sandbox config (-want +got):\n%s", diff)
	}

	hostNet := podtest.NewPod(func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.HostPID = true, true })
	got, err = SandboxConfig(hostNet, SandboxOptions{})
	if err != nil {
		t.Fatalf("SandboxConfig: %v", err)
	}
	ns := got.Linux.SecurityContext.NamespaceOptions
	if got.Hostname != "" || ns.Network != runtimeapi.NamespaceMode_NODE || ns.Pid != runtimeapi.NamespaceMode_NODE {
		t.Errorf("host network sandbox: hostname %q, namespaces %v", got.Hostname, ns)
	}
}

func TestContainerResources(t *testing.T) {
	rl := func(kv ...string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	node := rl("memory", "10Gi")
	tests := []struct {
		name string
		res  v1.ResourceRequirements
		want *runtimeapi.LinuxContainerResources
	}{
		{"best effort", v1.ResourceRequirements{},
			&runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 1000}},
		{"guaranteed", v1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "1Gi"), Limits: rl("cpu", "500m", "memory", "1Gi")},
			&runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 1 << 30, OomScoreAdj: -997}},
		{"burstable by memory share", v1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "1Gi")},
			&runtimeapi.LinuxContainerResources{CpuShares: 2048, CpuPeriod: 100000, OomScoreAdj: 900}},
		{"limit only sets shares from the limit", v1.ResourceRequirements{Limits: rl("cpu", "250m")},
			&runtimeapi.LinuxContainerResources{CpuShares: 256, CpuPeriod: 100000, CpuQuota: 25000, OomScoreAdj: 999}},
		{"tiny cpu is clamped", v1.ResourceRequirements{Requests: rl("cpu", "1m"), Limits: rl("cpu", "1m", "memory", "64Mi")},
			&runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, CpuQuota: 1000, MemoryLimitInBytes: 64 << 20, OomScoreAdj: 999}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podtest.NewPod(podtest.Modify("app", func(c *v1.Container) { c.Resources = tt.res }))
			got := ContainerResources(pod, &pod.Spec.Containers[0], node, ResourceOptions{})
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerConfigOOMGroupKill(t *testing.T) {
	pod := podtest.NewPod()
	for _, group := range []bool{false, true} {
		got, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerOptions{SandboxID: "s1", Resources: ResourceOptions{OOMGroupKill: group}})
		if err != nil {
			t.Fatalf("ContainerConfig: %v", err)
		}
		unified := got.GetLinux().GetResources().GetUnified()
		if group && unified["memory.oom.group"] != "1" {
			t.Errorf("OOMGroupKill: unified %v, want memory.oom.group 1", unified)
		}
		if !group && len(unified) != 0 {
			t.Errorf("no OOMGroupKill: unified %v, want none (cgroup v1 has no memory.oom.group)", unified)
		}
	}
	r := OOMGroupKill(&runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.high": "max"}})
	if diff := cmp.Diff(map[string]string{"memory.high": "max", "memory.oom.group": "1"}, r.Unified); diff != "" {
		t.Errorf("OOMGroupKill keeps other unified settings (-want +got):\n%s", diff)
	}
}

func TestContainerConfig(t *testing.T) {
	pod := podtest.NewPod(func(p *v1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
		p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)}
	}, podtest.Modify("app", func(c *v1.Container) {
		c.Command = []string{"/bin/sh", "-c"}
		c.Args = []string{"echo $(GREETING) $$(HOME) $(UNSET)"}
		c.WorkingDir = "/work"
		c.Env = []v1.EnvVar{{Name: "GREETING", Value: "hi"}}
		c.TerminationMessagePath = "/dev/termination-log"
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
		c.Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}}
		c.Stdin, c.TTY = true, true
		c.SecurityContext = &v1.SecurityContext{
			RunAsGroup:               ptr.To[int64](3000),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
			SeccompProfile:           &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		}
	}))
	mounts := []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/var/lib/nodelet/pods/uid-1/volumes/data"}}
	got, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerOptions{
		RestartCount: 3, SandboxID: "s1", Mounts: mounts, ImageRef: "sha256:abc", ExtraLabels: map[string]string{"nodelet.io/node": "n1"},
	})
	if err != nil {
		t.Fatalf("ContainerConfig: %v", err)
	}
	want := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
		Image:      &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "busybox:1"},
		Command:    []string{"/bin/sh", "-c"},
		Args:       []string{"echo hi $(HOME) $(UNSET)"},
		WorkingDir: "/work",
		Envs:       []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hi")}},
		Mounts:     mounts,
		Labels: map[string]string{
			"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "uid-1",
			"io.kubernetes.container.name": "app", state.ContainerHashLabel: podspec.ContainerHash(&pod.Spec.Containers[0]),
			state.SandboxIDLabel: "s1", "nodelet.io/node": "n1",
		},
		Annotations: map[string]string{
			AnnotationRestartCount: "3", AnnotationTerminationMessagePath: "/dev/termination-log",
			AnnotationTerminationMessagePolicy: "File", AnnotationTerminationGracePeriod: "45",
			AnnotationPorts: `[{"containerPort":80,"protocol":"TCP"}]`,
		},
		LogPath: "app/3.log",
		Stdin:   true,
		Tty:     true,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 1000},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				Capabilities:       &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}},
				NamespaceOptions:   &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
				RunAsUser:          &runtimeapi.Int64Value{Value: 1000},
				RunAsGroup:         &runtimeapi.Int64Value{Value: 3000},
				ReadonlyRootfs:     true,
				SupplementalGroups: []int64{2000},
				NoNewPrivs:         true,
				Seccomp:            &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
				MaskedPaths:        defaultMaskedPaths,
				ReadonlyPaths:      defaultReadonlyPaths,
			},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("container config (-want +got):\n%s", diff)
	}
}

func TestContainerConfigSecurityChecks(t *testing.T) {
	nonRoot := func(user *int64) podtest.Option {
		return podtest.Modify("app", func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: user}
		})
	}
	tests := []struct {
		name      string
		pod       *v1.Pod
		imageUID  *int64
		imageUser string
		wantErr   bool
		wantUser  *runtimeapi.Int64Value
		wantName  string
	}{
		{name: "root user refused", pod: podtest.NewPod(nonRoot(ptr.To[int64](0))), wantErr: true},
		{name: "numeric non-root user", pod: podtest.NewPod(nonRoot(ptr.To[int64](1000))), wantUser: &runtimeapi.Int64Value{Value: 1000}},
		{name: "image runs as root", pod: podtest.NewPod(nonRoot(nil)), imageUID: ptr.To[int64](0), wantErr: true},
		{name: "image non-root uid", pod: podtest.NewPod(nonRoot(nil)), imageUID: ptr.To[int64](65534), wantUser: &runtimeapi.Int64Value{Value: 65534}},
		{name: "image user name cannot be verified", pod: podtest.NewPod(nonRoot(nil)), imageUser: "nobody", wantErr: true},
		{name: "unknown image user left to the runtime", pod: podtest.NewPod(nonRoot(nil))},
		{name: "image user name without non-root", pod: podtest.NewPod(), imageUser: "nobody", wantName: "nobody"},
		{name: "localhost seccomp without a path", pod: podtest.NewPod(podtest.Modify("app", func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
		})), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ContainerConfig(tt.pod, &tt.pod.Spec.Containers[0], ContainerOptions{ImageUID: tt.imageUID, ImageUser: tt.imageUser})
			if tt.wantErr {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a *ConfigError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ContainerConfig: %v", err)
			}
			sc := cfg.Linux.SecurityContext
			if diff := cmp.Diff(tt.wantUser, sc.RunAsUser, protocmp.Transform()); diff != "" || sc.RunAsUsername != tt.wantName {
				t.Errorf("user %v %q, want %v %q", sc.RunAsUser, sc.RunAsUsername, tt.wantUser, tt.wantName)
			}
		})
	}
}

func TestEphemeralContainerConfig(t *testing.T) {
	ns := func(mode runtimeapi.NamespaceMode, target string) *runtimeapi.NamespaceOption {
		return &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: mode, Ipc: runtimeapi.NamespaceMode_POD, TargetId: target}
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		targetID string
		want     *runtimeapi.NamespaceOption
	}{
		{name: "without a target it gets a process namespace of its own",
			pod: podtest.NewPod(podtest.Ephemerals("debugger")), want: ns(runtimeapi.NamespaceMode_CONTAINER, "")},
		{name: "with a target it joins the target's process namespace",
			pod: podtest.NewPod(podtest.Ephemerals("debugger"), podtest.Target("debugger", "app")), targetID: "app-0",
			want: ns(runtimeapi.NamespaceMode_TARGET, "app-0")},
		{name: "a pod sharing one process namespace keeps it",
			pod:      podtest.NewPod(podtest.Ephemerals("debugger"), podtest.Target("debugger", "app"), func(p *v1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }),
			targetID: "app-0", want: ns(runtimeapi.NamespaceMode_POD, "")},
		{name: "a host PID pod keeps the host's",
			pod:      podtest.NewPod(podtest.Ephemerals("debugger"), podtest.Target("debugger", "app"), func(p *v1.Pod) { p.Spec.HostPID = true }),
			targetID: "app-0", want: ns(runtimeapi.NamespaceMode_NODE, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := podspec.ContainerSpec(tt.pod, "debugger")
			cfg, err := ContainerConfig(tt.pod, c, ContainerOptions{SandboxID: "s1", TargetContainerID: tt.targetID})
			if err != nil {
				t.Fatalf("ContainerConfig: %v", err)
			}
			if diff := cmp.Diff(tt.want, cfg.Linux.SecurityContext.NamespaceOptions, protocmp.Transform()); diff != "" {
				t.Errorf("namespaces (-want +got):\n%s", diff)
			}
			if cfg.Metadata.Name != "debugger" || cfg.Metadata.Attempt != 0 || cfg.LogPath != "debugger/0.log" || cfg.Labels["io.kubernetes.container.name"] != "debugger" {
				t.Errorf("metadata %v, log path %q, labels %v", cfg.Metadata, cfg.LogPath, cfg.Labels)
			}
		})
	}
}

// cpuCFSQuotaPeriod scales the quota; cpuCFSQuota false leaves limits
// without a quota, on the containers and the sandbox alike.
func TestCPUQuotaSettings(t *testing.T) {
	c := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*c}}}
	for _, tc := range []struct {
		name          string
		q             CPUQuota
		period, quota int64
	}{
		{"default", CPUQuota{}, 100000, 25000},
		{"50ms", CPUQuota{Period: 50000}, 50000, 12500},
		{"1ms floor", CPUQuota{Period: 1000}, 1000, 1000},
		{"unenforced", CPUQuota{Unenforced: true}, 0, 0},
	} {
		r := ContainerResources(pod, c, nil, ResourceOptions{CPUQuota: tc.q})
		if r.CpuPeriod != tc.period || r.CpuQuota != tc.quota || r.CpuShares != 102 {
			t.Errorf("%s: container period %d quota %d shares %d, want %d %d 102", tc.name, r.CpuPeriod, r.CpuQuota, r.CpuShares, tc.period, tc.quota)
		}
		sb := SandboxResources(pod, tc.q)
		if sb.CpuPeriod != tc.period || sb.CpuQuota != tc.quota {
			t.Errorf("%s: sandbox period %d quota %d, want %d %d", tc.name, sb.CpuPeriod, sb.CpuQuota, tc.period, tc.quota)
		}
	}
}
