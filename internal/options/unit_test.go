package options

import (
	"bufio"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestHostUnitCommandLine runs the command line of config/host's unit and
// kubeadm drop-in through Parse, with sample kubeadm-flags.env and
// /etc/default/kubelet files and the kubeadm config.yaml, so that the
// documented installation is known to start.
func TestHostUnitCommandLine(t *testing.T) {
	env := map[string]string{}
	execStart := ""
	for _, unit := range []string{"../../config/host/nodelet.service", "../../config/host/10-kubeadm.conf"} {
		for _, line := range readLines(t, unit) {
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			switch key {
			case "Environment":
				k, v, _ := strings.Cut(strings.Trim(value, `"`), "=")
				env[k] = v
			case "EnvironmentFile":
				// The unit's files, read from samples instead.
				path := strings.TrimPrefix(value, "-")
				sample := map[string]string{
					"/var/lib/kubelet/kubeadm-flags.env": "testdata/kubeadm-flags.env",
					"/etc/default/kubelet":               "testdata/default-kubelet",
				}[path]
				if sample == "" {
					t.Fatalf("%s: no sample for EnvironmentFile %s", unit, path)
				}
				for _, l := range readLines(t, sample) {
					k, v, _ := strings.Cut(l, "=")
					env[k] = strings.Trim(v, `"`)
				}
			case "ExecStart":
				execStart = value
			}
		}
	}
	fields := strings.Fields(execStart)
	if len(fields) == 0 || fields[0] != "/usr/local/bin/nodelet" {
		t.Fatalf("ExecStart %q does not run /usr/local/bin/nodelet", execStart)
	}
	// systemd splits an unquoted $VAR at white space.
	var args []string
	for _, f := range fields[1:] {
		if name, ok := strings.CutPrefix(f, "$"); ok {
			args = append(args, strings.Fields(env[name])...)
			continue
		}
		args = append(args, f)
	}
	for i, a := range args {
		args[i] = strings.Replace(a, "--config=/var/lib/kubelet/config.yaml", "--config=testdata/kubeadm-1.37-config.yaml", 1)
	}
	o, err := Parse(args, nil)
	if err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	c := o.Config
	checks := map[string][2]any{
		"kubeconfig":         {o.Kubeconfig, "/etc/kubernetes/kubelet.conf"},
		"bootstrap":          {o.BootstrapKubeconfig, "/etc/kubernetes/bootstrap-kubelet.conf"},
		"rootDir":            {c.RootDir, "/var/lib/kubelet"},
		"certDir":            {o.CertDir, "/var/lib/kubelet/pki"},
		"runtime":            {c.ContainerRuntimeEndpoint, "unix:///var/run/containerd/containerd.sock"},
		"nodeName":           {c.NodeName, "worker-1"},
		"nodeIP":             {c.NodeIP, "10.0.0.5"},
		"pause":              {c.PodInfraContainerImage, "registry.k8s.io/pause:3.10.1"},
		"cloudProvider":      {o.CloudProvider, "external"},
		"label":              {c.NodeLabels["node.example/pool"], "a"},
		"taint":              {len(c.RegisterWithTaints) == 2 && c.RegisterWithTaints[0].Effect == corev1.TaintEffectNoSchedule, true},
		"uninitialized":      {c.RegisterWithTaints[len(c.RegisterWithTaints)-1] == UninitializedTaint, true},
		"maxPods":            {c.MaxPods, int32(200)},
		"verbosity":          {int(c.Logging.Verbosity), 2},
		"staticPodPath":      {c.StaticPodPath, "/etc/kubernetes/manifests"},
		"cgroupDriver":       {c.CgroupDriver, "systemd"},
		"rotateCertificates": {*c.RotateCertificates, true},
	}
	for name, gw := range checks {
		if gw[0] != gw[1] {
			t.Errorf("%s = %v, want %v", name, gw[0], gw[1])
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := strings.TrimSpace(s.Text())
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}
