package options

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRealNodeConfigurations parses the kubelet command line and
// KubeletConfiguration of four node images or distributions, as each of
// them writes it, the way nodelet's main does. testdata/nodes/<name>/flags
// holds the kubelet's arguments one to a line, in the order the
// distribution passes them (a line may be "--name value", two arguments);
// the configuration file lies next to it, and SOURCE.md says where both
// come from and which per-machine values were filled in.
//
// Only the paths of --config and --config-dir are rewritten, to the test
// data; every other path is kept as the distribution has it: parsing reads
// no file but the configuration.
func TestRealNodeConfigurations(t *testing.T) {
	cases := []struct {
		name string
		// config and configDir are the test data standing for the files
		// --config and --config-dir name.
		config    string
		configDir string
		// nodeName is $NODE_NAME where the distribution passes no
		// --hostname-override and the node is named after the host.
		nodeName string
		// wantErr is a part of the first error Parse returns; empty when
		// the command line parses.
		wantErr string
		// check, when the command line parses, checks what it maps to.
		check func(t *testing.T, o *Options)
	}{
		{
			name: "eks-al2023", config: "config.json", configDir: "config.json.d",
			check: func(t *testing.T, o *Options) {
				c := o.Config
				if c.ShutdownGracePeriod.Duration != 150*time.Second || c.ShutdownGracePeriodCriticalPods.Duration != 30*time.Second || len(c.ShutdownGracePeriodByPodPriority) != 0 {
					t.Errorf("shutdownGracePeriod %v, shutdownGracePeriodCriticalPods %v, shutdownGracePeriodByPodPriority %v",
						c.ShutdownGracePeriod.Duration, c.ShutdownGracePeriodCriticalPods.Duration, c.ShutdownGracePeriodByPodPriority)
				}
			},
		},
		{
			name: "gce-kube-up", config: "config.yaml", nodeName: "kubernetes-minion-group-7xkz",
			check: func(t *testing.T, o *Options) {
				if o.Config.Server.ReadOnlyPort != 10255 || o.Config.CgroupDriver != "systemd" || o.Config.ImageCredentialProviderBinDir != "/home/kubernetes/bin" {
					t.Errorf("readOnlyPort %d, cgroupDriver %q, credential provider bin dir %q", o.Config.Server.ReadOnlyPort, o.Config.CgroupDriver, o.Config.ImageCredentialProviderBinDir)
				}
				if !strings.Contains(strings.Join(o.Warnings, "\n"), "--experimental-mounter-path") {
					t.Errorf("no warning for --experimental-mounter-path in %q", o.Warnings)
				}
			},
		},
		{
			name: "aks-ubuntu", config: "config.json", nodeName: "aks-nodepool1-12345678-vmss000000",
			check: func(t *testing.T, o *Options) {
				c := o.Config
				if len(c.Server.TLSCipherSuites) != 8 || !c.ProtectKernelDefaults || c.RuntimeRequestTimeout.Duration != 15*time.Minute {
					t.Errorf("tlsCipherSuites %v, protectKernelDefaults %v, runtimeRequestTimeout %v", c.Server.TLSCipherSuites, c.ProtectKernelDefaults, c.RuntimeRequestTimeout)
				}
				if c.NodeLabels["kubernetes.azure.com/mode"] != "system" {
					t.Errorf("node labels %v", c.NodeLabels)
				}
			},
		},
		{
			name: "k3s", configDir: "kubelet.conf.d",
			check: func(t *testing.T, o *Options) {
				c := o.Config
				// From the drop-in: k3s passes no --config.
				if c.ContainerRuntimeEndpoint != "unix:///run/k3s/containerd/containerd.sock" || c.StaticPodPath != "/var/lib/rancher/k3s/agent/pod-manifests" ||
					c.EvictionHard["nodefs.available"] != "5%" || *c.SerializeImagePulls {
					t.Errorf("runtime %q, staticPodPath %q, evictionHard %v, serializeImagePulls %v", c.ContainerRuntimeEndpoint, c.StaticPodPath, c.EvictionHard, *c.SerializeImagePulls)
				}
				if c.NodeName != "worker-1" || c.NodeIP != "10.0.0.21" || len(c.NodeLabels) != 0 {
					t.Errorf("node %q, IP %q, labels %v", c.NodeName, c.NodeIP, c.NodeLabels)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "nodes", tc.name)
			if tc.nodeName != "" {
				t.Setenv("NODE_NAME", tc.nodeName)
			}
			args := nodeArgs(t, dir, tc.config, tc.configDir)
			opts, err := Parse(args, nil)
			if err != nil {
				t.Logf("Parse: %v", err)
			} else {
				for _, w := range opts.Warnings {
					t.Logf("warning: %s", w)
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Parse(%q): %v", args, err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("Parse(%q) succeeded, want an error containing %q", args, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
			if err == nil && tc.check != nil {
				tc.check(t, opts)
			}
		})
	}
}

// nodeArgs reads dir/flags and points --config and --config-dir at the
// test data config and configDir in dir.
func nodeArgs(t *testing.T, dir, config, configDir string) []string {
	t.Helper()
	rewrite := map[string]string{}
	if config != "" {
		rewrite["--config"] = filepath.Join(dir, config)
	}
	if configDir != "" {
		rewrite["--config-dir"] = filepath.Join(dir, configDir)
	}
	var args []string
	for _, line := range readLines(t, filepath.Join(dir, "flags")) {
		args = append(args, strings.Fields(line)...)
	}
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(args[i], "=")
		path, ok := rewrite[name]
		switch {
		case !ok:
		case hasValue:
			args[i] = name + "=" + path
		case i+1 < len(args):
			args[i+1] = path
			i++
		}
	}
	return args
}
