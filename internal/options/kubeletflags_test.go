package options

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// TestEveryKubeletFlagIsAccepted holds nodelet's flag set to the pinned
// kubelet's (testdata/kubelet-flags.txt, from its --help): a command line
// a real node passes its kubelet never fails on an unknown flag.
func TestEveryKubeletFlagIsAccepted(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "kubelet-flags.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs := newFlagSet(&Options{}, &v1alpha1.NodeletConfiguration{}, newKubeletOverlay(), nil)
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		name := strings.TrimSpace(sc.Text())
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		n++
		if fs.Lookup(name) == nil {
			t.Errorf("the kubelet's flag --%s is unknown to nodelet", name)
		}
	}
	if n < 100 {
		t.Fatalf("only %d kubelet flags listed", n)
	}
}

// TestKubeletFieldFlagsNameFields checks that each kubelet field flag sets
// a field of the kubelet's configuration that kubeletFields knows.
func TestKubeletFieldFlagsNameFields(t *testing.T) {
	known := map[string]bool{}
	for _, f := range kubeletFields {
		known[f.name] = true
	}
	seen := map[string]bool{}
	for _, f := range kubeletFieldFlags {
		top, _, _ := strings.Cut(f.field, ".")
		if !known[top] {
			t.Errorf("--%s sets %s, not a KubeletConfiguration field", f.flag, f.field)
		}
		if seen[f.flag] {
			t.Errorf("--%s listed twice", f.flag)
		}
		seen[f.flag] = true
		if _, ok := ignoredKubeletFlags[f.flag]; ok {
			t.Errorf("--%s is both a field flag and an ignored flag", f.flag)
		}
	}
}

func writeFileAt(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubeletConfigPrecedence checks the kubelet's order: the file, then
// the drop-ins in lexical order (nested directories included, .conf files
// only), then the kubelet's flags.
func TestKubeletConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	config := writeFileAt(t, filepath.Join(dir, "config.yaml"), kubeletHeader+"podPidsLimit: 100\nmaxPods: 50\nevictionHard:\n  memory.available: 300Mi\n")
	dropins := filepath.Join(dir, "conf.d")
	writeFileAt(t, filepath.Join(dropins, "20-b.conf"), kubeletHeader+"podPidsLimit: 300\n")
	writeFileAt(t, filepath.Join(dropins, "10-a.conf"), kubeletHeader+"podPidsLimit: 200\nmaxPods: 60\nevictionHard:\n  nodefs.available: 7%\n")
	writeFileAt(t, filepath.Join(dropins, "30-c.yaml"), kubeletHeader+"maxPods: 999\n")
	writeFileAt(t, filepath.Join(dropins, "sub", "40-d.conf"), kubeletHeader+"containerLogMaxFiles: 7\n")

	t.Setenv("NODE_NAME", "n1")
	o, err := Parse([]string{"--config", config, "--config-dir", dropins}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if *c.PodPidsLimit != 300 || c.MaxPods != 60 || c.ContainerLogMaxFiles != 7 {
		t.Errorf("podPidsLimit %d maxPods %d containerLogMaxFiles %d, want 300, 60, 7", *c.PodPidsLimit, c.MaxPods, c.ContainerLogMaxFiles)
	}
	if c.EvictionHard["memory.available"] != "300Mi" || c.EvictionHard["nodefs.available"] != "7%" {
		t.Errorf("evictionHard %v: the drop-in's map must merge with the file's", c.EvictionHard)
	}

	o, err = Parse([]string{"--config", config, "--config-dir", dropins, "--pod-max-pids=400", "--max-pods=70"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *o.Config.PodPidsLimit != 400 || o.Config.MaxPods != 70 {
		t.Errorf("podPidsLimit %d maxPods %d, want the flags' 400 and 70", *o.Config.PodPidsLimit, o.Config.MaxPods)
	}
}

func TestKubeletFlagsErrorsAndWarnings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("NODE_NAME", "n1")
	nodelet := writeFileAt(t, filepath.Join(dir, "nodelet.yaml"), "apiVersion: "+v1alpha1.GroupVersion.String()+"\nkind: NodeletConfiguration\nmaxPods: 33\n")
	badDropins := filepath.Join(dir, "bad.d")
	writeFileAt(t, filepath.Join(badDropins, "10.conf"), "maxPods: 5\n")

	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o *Options)
	}{
		{name: "a refused value names the flag", args: []string{"--cpu-manager-policy=static"}, wantErr: "--cpu-manager-policy"},
		{name: "a refused value at the kubelet's default", args: []string{"--cpu-manager-policy=none", "--register-node"}},
		{name: "a bad value", args: []string{"--kube-reserved=cpu"}, wantErr: "kube-reserved"},
		{name: "kubelet flags without a file", args: []string{"--kube-reserved=cpu=100m,memory=100Mi", "--eviction-soft=memory.available<300Mi", "--eviction-soft-grace-period=memory.available=30s", "--enable-server=false"},
			check: func(t *testing.T, o *Options) {
				c := o.Config
				if c.KubeReserved["memory"] != "100Mi" || c.EvictionSoft["memory.available"] != "300Mi" || *c.Server.Port != 0 {
					t.Errorf("kubeReserved %v evictionSoft %v port %d", c.KubeReserved, c.EvictionSoft, *c.Server.Port)
				}
			}},
		{name: "over a NodeletConfiguration", args: []string{"--config", nodelet, "--pod-max-pids=50", "--read-only-port=10255"},
			check: func(t *testing.T, o *Options) {
				if c := o.Config; c.MaxPods != 33 || *c.PodPidsLimit != 50 || c.Server.ReadOnlyPort != 10255 {
					t.Errorf("maxPods %d podPidsLimit %d readOnlyPort %d, want the file's 33 and the flags' 50 and 10255", c.MaxPods, *c.PodPidsLimit, c.Server.ReadOnlyPort)
				}
			}},
		{name: "drop-ins with a NodeletConfiguration", args: []string{"--config", nodelet, "--config-dir", badDropins}, wantErr: "--config-dir"},
		{name: "a drop-in without its kind", args: []string{"--config-dir", badDropins}, wantErr: "10.conf"},
		{name: "a missing drop-in directory", args: []string{"--config-dir", filepath.Join(dir, "none")}, wantErr: "--config-dir"},
		{name: "ignored flags warn", args: []string{"--runtime-cgroups=/system.slice/containerd.service", "--lock-file=/run/kubelet.lock"},
			check: func(t *testing.T, o *Options) {
				all := strings.Join(o.Warnings, "\n")
				if !strings.Contains(all, "--runtime-cgroups") || !strings.Contains(all, "--lock-file") {
					t.Errorf("warnings %q", o.Warnings)
				}
			}},
		{name: "empty node labels", args: []string{"--node-labels="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(tc.args, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error naming %s", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}
