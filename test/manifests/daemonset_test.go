package manifests

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/options"
	"github.com/nodelet/nodelet/test/utils"
)

// hostPorts are the ports a node's own agents listen on in the host
// network namespace, which nodelet's DaemonSet shares.
var hostPorts = map[int]string{
	10248: "kubelet healthz",
	10249: "kube-proxy metrics",
	10250: "kubelet API",
	10255: "kubelet read-only API",
	10256: "kube-proxy healthz",
	10257: "kube-controller-manager",
	10259: "kube-scheduler",
	2379:  "etcd clients",
	2380:  "etcd peers",
	6443:  "kube-apiserver",
}

// kubeletPaths are the host paths of the kubelet and its containerd that
// nodelet must not share.
var kubeletPaths = []string{"/run/containerd", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}

// deployment is the rendered DaemonSet with its nodelet container and the
// configuration its ConfigMap holds, defaulted and validated as nodelet
// would on a host named hostNode.
type deployment struct {
	ds        appsv1.DaemonSet
	container corev1.Container
	cfg       *v1alpha1.NodeletConfiguration
}

func loadDeployment(t *testing.T, rendered []byte, hostNode string) deployment {
	t.Helper()
	var d deployment
	var configMaps []corev1.ConfigMap
	for _, u := range splitObjects(t, rendered) {
		switch u.GetKind() {
		case "DaemonSet":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d.ds); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
				t.Fatal(err)
			}
			configMaps = append(configMaps, cm)
		}
	}
	spec := d.ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("DaemonSet has %d containers, want nodelet's only", len(spec.Containers))
	}
	d.container = spec.Containers[0]

	// The configuration file the DaemonSet points nodelet at.
	configPath := argValue(t, d.container.Args, "--config")
	vol, key := volumeOf(t, spec, d.container, configPath)
	if vol.ConfigMap == nil {
		t.Fatalf("--config=%s is not in a ConfigMap volume", configPath)
	}
	i := slices.IndexFunc(configMaps, func(cm corev1.ConfigMap) bool { return cm.Name == vol.ConfigMap.Name })
	if i < 0 {
		t.Fatalf("ConfigMap %s is not part of the configuration", vol.ConfigMap.Name)
	}
	cfg, err := options.Decode([]byte(configMaps[i].Data[key]))
	if err != nil {
		t.Fatalf("decoding %s: %v", configPath, err)
	}
	// nodelet's default node name is $NODE_NAME, as the kubelet expands
	// it on hostNode.
	t.Setenv("NODE_NAME", envValue(t, d.container, "NODE_NAME", hostNode))
	if err := options.Complete(cfg); err != nil {
		t.Fatal(err)
	}
	d.cfg = cfg
	return d
}

// argValue returns the value of a --name=value argument.
func argValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s=... in the arguments %q", name, args)
	return ""
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// envValue returns the value of an environment variable of c as the
// kubelet sets it on a node named hostNode: spec.nodeName field
// references and $(VAR) references to variables defined before it.
func envValue(t *testing.T, c corev1.Container, name, hostNode string) string {
	t.Helper()
	vals := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
				t.Fatalf("env %s: only spec.nodeName references are understood here", e.Name)
			}
			v = hostNode
		}
		vals[e.Name] = envRef.ReplaceAllStringFunc(v, func(ref string) string {
			return vals[envRef.FindStringSubmatch(ref)[1]]
		})
	}
	v, ok := vals[name]
	if !ok {
		t.Fatalf("the container sets no %s", name)
	}
	return v
}

// volumeOf returns the volume mounted at the longest mount path holding
// path, and path relative to it.
func volumeOf(t *testing.T, spec corev1.PodSpec, c corev1.Container, path string) (corev1.Volume, string) {
	t.Helper()
	var best corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if (path == m.MountPath || strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")) && len(m.MountPath) > len(best.MountPath) {
			best = m
		}
	}
	if best.Name == "" {
		t.Fatalf("%s is on no volume of the container", path)
	}
	for _, v := range spec.Volumes {
		if v.Name == best.Name {
			rel, _ := filepath.Rel(best.MountPath, path)
			return v, rel
		}
	}
	t.Fatalf("volume %s is mounted but not defined", best.Name)
	return corev1.Volume{}, ""
}

// hostPathMount finds the mount of the container at mountPath and
// returns it with the host path it comes from.
func hostPathMount(t *testing.T, d deployment, mountPath string) (corev1.VolumeMount, string) {
	t.Helper()
	for _, m := range d.container.VolumeMounts {
		if m.MountPath != mountPath {
			continue
		}
		for _, v := range d.ds.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return m, v.HostPath.Path
			}
		}
	}
	t.Fatalf("nothing of the host is mounted at %s", mountPath)
	return corev1.VolumeMount{}, ""
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return n
}

// TestDaemonSetRunsBesideAKubelet checks that config/default's nodelet
// shares nothing with the kubelet of the host it runs on: not its Node,
// ports, runtime or directories; and that what it reads of the host is
// the host's.
func TestDaemonSetRunsBesideAKubelet(t *testing.T) {
	const hostNode = "worker-1"
	d := loadDeployment(t, render(t, "../../config/default"), hostNode)
	spec := d.ds.Spec.Template.Spec
	cfg := d.cfg

	t.Run("own Node", func(t *testing.T) {
		if cfg.NodeName != hostNode+"-nodelet" {
			t.Errorf("nodelet on %s runs Node %q, want %s-nodelet", hostNode, cfg.NodeName, hostNode)
		}
		if len(cfg.RegisterWithTaints) == 0 {
			t.Error("the Node is registered without taints: every pod could land on it")
		}
		// The DaemonSet tolerates everything, so only affinity keeps it off
		// the Nodes its own nodelets register.
		labelled := false
		for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if _, ok := cfg.NodeLabels[e.Key]; ok && e.Operator == corev1.NodeSelectorOpDoesNotExist {
					labelled = true
				}
			}
		}
		if !labelled {
			t.Errorf("the DaemonSet's affinity does not exclude Nodes labelled with nodeLabels %v: it would run inside its own node", cfg.NodeLabels)
		}
	})

	t.Run("ports", func(t *testing.T) {
		ports := map[string]int{
			"server.port":        int(*cfg.Server.Port),
			"healthzBindAddress": port(t, cfg.HealthzBindAddress),
			"metricsBindAddress": port(t, cfg.MetricsBindAddress),
		}
		seen := map[int]string{}
		for field, p := range ports {
			if owner, ok := hostPorts[p]; ok {
				t.Errorf("%s %d is the port of the %s", field, p, owner)
			}
			if other, ok := seen[p]; ok {
				t.Errorf("%s and %s are both %d", field, other, p)
			}
			seen[p] = field
		}
		for _, probe := range []*corev1.Probe{d.container.StartupProbe, d.container.LivenessProbe, d.container.ReadinessProbe} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.IntValue() != ports["healthzBindAddress"] {
				t.Errorf("probe %+v does not ask healthzBindAddress", probe)
			}
		}
		if d.container.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("liveness probe path %s, want /healthz", d.container.LivenessProbe.HTTPGet.Path)
		}
		if len(d.container.Ports) != 1 || int(d.container.Ports[0].ContainerPort) != ports["server.port"] {
			t.Errorf("container ports %v, want the node API's %d", d.container.Ports, ports["server.port"])
		}
	})

	t.Run("runtime and directories", func(t *testing.T) {
		socket := strings.TrimPrefix(cfg.ContainerRuntimeEndpoint, "unix://")
		if cfg.ImageServiceEndpoint != cfg.ContainerRuntimeEndpoint {
			t.Errorf("image service %s is not the runtime's %s", cfg.ImageServiceEndpoint, cfg.ContainerRuntimeEndpoint)
		}
		// What nodelet hands the runtime (pod directories, log files, the
		// socket it dials) must be the same path on the host.
		for field, dir := range map[string]string{
			"containerRuntimeEndpoint": filepath.Dir(socket),
			"rootDir":                  cfg.RootDir,
			"podLogsDir":               cfg.PodLogsDir,
		} {
			m, host := hostPathMount(t, d, dir)
			if host != dir {
				t.Errorf("%s %s is mounted from the host's %s, want the same path", field, dir, host)
			}
			for _, k := range kubeletPaths {
				if dir == k || strings.HasPrefix(dir, k+"/") {
					t.Errorf("%s %s is the kubelet's or its runtime's", field, dir)
				}
			}
			if field == "rootDir" && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional) {
				t.Errorf("rootDir is mounted without Bidirectional propagation: the runtime would not see volume mounts")
			}
		}
	})

	t.Run("host root", func(t *testing.T) {
		// The host's identity files and the host paths of hostPath and
		// local volumes are read, and ...OrCreate ones made, under
		// hostRoot: it must be the host's /, writable, and see the mounts
		// the host makes later.
		if cfg.HostRoot == "/" {
			t.Fatal("hostRoot is /: nodelet would read the image's files and make hostPath volumes in its container")
		}
		m, host := hostPathMount(t, d, cfg.HostRoot)
		if host != "/" || m.ReadOnly || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
			t.Errorf("hostRoot %s comes from the host's %s (read-only %v, propagation %v), want / writable with HostToContainer",
				cfg.HostRoot, host, m.ReadOnly, m.MountPropagation)
		}
	})

	t.Run("client CA", func(t *testing.T) {
		// Without it the API server's kubelet client certificate gets 401:
		// no kubectl logs, exec or port-forward.
		if cfg.Server.ClientCAFile == "" {
			t.Fatal("server.clientCAFile is not set")
		}
		v, rel := volumeOf(t, spec, d.container, cfg.Server.ClientCAFile)
		if v.ConfigMap == nil || v.ConfigMap.Name != "nodelet-client-ca" || rel != "ca.crt" {
			t.Fatalf("server.clientCAFile %s is %s of volume %+v, want ca.crt of ConfigMap nodelet-client-ca", cfg.Server.ClientCAFile, rel, v)
		}
		if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
			t.Error("the client CA ConfigMap is optional: nodelet would start refusing the API server")
		}
	})

	t.Run("credentials", func(t *testing.T) {
		kubeconfig := argValue(t, d.container.Args, "--kubeconfig")
		if !strings.HasPrefix(kubeconfig, cfg.RootDir+"/") {
			t.Errorf("--kubeconfig %s is not under rootDir %s: it would not survive a restart", kubeconfig, cfg.RootDir)
		}
		// Each host has its own bootstrap token, on the host: a Secret
		// would be one token shared by every host's pod. nodelet removes
		// the file after the join, so the mount is writable.
		bootstrap := argValue(t, d.container.Args, "--bootstrap-kubeconfig")
		m, host := hostPathMount(t, d, filepath.Dir(bootstrap))
		if host != "/etc/nodelet/bootstrap" || m.ReadOnly {
			t.Errorf("--bootstrap-kubeconfig %s is in the host's %s (read-only %v), want the host's /etc/nodelet/bootstrap, writable", bootstrap, host, m.ReadOnly)
		}
		for _, v := range spec.Volumes {
			if v.Secret != nil || v.Projected != nil {
				t.Errorf("volume %s holds a Secret or projected credentials; nodelet's credentials are the host's", v.Name)
			}
			if v.Name == m.Name && (v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate) {
				t.Errorf("volume %s is not DirectoryOrCreate: a host that has joined has no bootstrap directory to keep", v.Name)
			}
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Error("the pod mounts a ServiceAccount token; nodelet uses its node's credentials")
		}
	})

	t.Run("privileges", func(t *testing.T) {
		sc := d.container.SecurityContext
		if sc == nil || sc.Privileged == nil || !*sc.Privileged || !spec.HostPID || !spec.HostNetwork {
			t.Error("nodelet must run privileged in the host's PID and network namespaces")
		}
		if !slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "" && t.Operator == corev1.TolerationOpExists }) {
			t.Error("the DaemonSet does not tolerate every taint")
		}
		if d.container.Resources.Requests.Cpu().IsZero() || d.container.Resources.Requests.Memory().IsZero() {
			t.Error("no CPU or memory request")
		}
		if d.container.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("imagePullPolicy %s, want IfNotPresent: the image may be imported, not pulled", d.container.ImagePullPolicy)
		}
	})

	t.Run("host containerd", func(t *testing.T) {
		checkHostContainerd(t, strings.TrimPrefix(cfg.ContainerRuntimeEndpoint, "unix://"))
	})
}

var grpcAddress = regexp.MustCompile(`(?m)^\[grpc\]\s*\n\s*address\s*=\s*"([^"]+)"`)

// checkHostContainerd checks that config/host's containerd listens where
// the DaemonSet's nodelet dials and that containerd accepts the file.
func checkHostContainerd(t *testing.T, socket string) {
	t.Helper()
	data, err := os.ReadFile("../../config/host/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := grpcAddress.FindSubmatch(data)
	if len(m) != 2 || string(m[1]) != socket {
		t.Fatalf("config/host/config.toml listens on %q, nodelet dials %s", m, socket)
	}
	containerd, err := utils.RuntimeBinary(context.Background(), "containerd")
	if err != nil {
		t.Fatal(err)
	}
	// Load it with every path moved under a temporary directory, so that
	// nothing of the host is touched.
	dir := t.TempDir()
	moved := regexp.MustCompile(`"(/(var/lib|run|etc|opt)/nodelet-containerd)`).ReplaceAll(data, []byte(`"`+dir+`$1`))
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, moved, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(containerd, "--config", path, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd does not load config/host/config.toml: %v\n%s", err, out)
	}
}
