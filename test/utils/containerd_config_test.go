package utils

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestContainerdConfigLoads has the selected runtime's containerd read the
// configuration the harness writes (config dump: parse, migrate to its
// current version, apply every plugin's defaults) and checks that every
// setting of the harness comes out in the plugin that uses it, with no
// warning: a key containerd moved or renamed would come out at its
// default, or with a deprecation warning.
func TestContainerdConfigLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	binDir, err := RuntimeBinDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, podCIDRFromRuntime := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed subnet", true: "pod CIDR from the runtime"}[podCIDRFromRuntime], func(t *testing.T) {
			dir, err := os.MkdirTemp("", instanceDirPrefix)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			_, subnet, _ := net.ParseCIDR("10.250.200.0/24")
			c := &Containerd{
				Dir: dir, BinDir: binDir, Subnet: subnet, Bridge: "nlbr200", Network: "nodelet-200",
				opts:   ContainerdOptions{PodCIDRFromRuntime: podCIDRFromRuntime},
				socket: filepath.Join(dir, "containerd.sock"),
				config: filepath.Join(dir, "config.toml"),
			}
			extraCDI := filepath.Join(dir, "var-run-cdi")
			if podCIDRFromRuntime {
				c.opts.CDISpecDirs = []string{extraCDI}
			}
			if err := c.writeConfig(); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "containerd"), "--config", c.config, "config", "dump")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("containerd config dump: %v\n%s", err, stderr.String())
			}
			dump := strings.ReplaceAll(string(out), "'", `"`)
			for _, w := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				// Version 3 is what every containerd 2 reads; 2.4 writes 4
				// and says so when it reads 3.
				if w == "" || strings.Contains(w, "Configuration migrated from version 3,") {
					continue
				}
				t.Errorf("containerd warns about the configuration: %s", w)
			}
			cri, images, stream := `"io.containerd.grpc.v1.cri"`, `"io.containerd.grpc.v1.cri"`, `"io.containerd.grpc.v1.cri"`
			runtimes := cri + ".containerd.runtimes"
			if c.containerd2() {
				cri, images = `"io.containerd.cri.v1.runtime"`, `"io.containerd.cri.v1.images"`
				runtimes = cri + ".containerd.runtimes"
			}
			want := []struct{ table, line string }{
				{cri, `restrict_oom_score_adj = true`},
				{cri, `netns_mounts_under_state_dir = true`},
				{cri, `enable_selinux = false`},
				{cri + ".containerd", `default_runtime_name = "runc"`},
				{runtimes + ".runc", `runtime_type = "io.containerd.runc.v2"`},
				{runtimes + ".runc.options", `Root = "` + filepath.Join(dir, "runc") + `"`},
				{runtimes + ".runc.options", `BinaryName = "` + filepath.Join(binDir, "runc") + `"`},
				{runtimes + ".runc.options", `SystemdCgroup = false`},
				{runtimes + "." + SecondRuntimeHandler, `runtime_type = "io.containerd.runc.v2"`},
				{runtimes + "." + SecondRuntimeHandler + ".options", `BinaryName = "` + filepath.Join(binDir, "runc") + `"`},
				{cri + ".cni", `conf_dir = "` + filepath.Join(dir, "cni", "net.d") + `"`},
				{cri + ".cni", `max_conf_num = 1`},
				{stream, `stream_server_address = "127.0.0.1"`},
				{stream, `stream_server_port = "0"`},
				{images + ".registry", `config_path = "` + filepath.Join(dir, "certs.d") + `"`},
				{`"io.containerd.internal.v1.opt"`, `path = "` + filepath.Join(dir, "opt") + `"`},
			}
			if c.containerd2() {
				want = append(want,
					struct{ table, line string }{cri + ".cni", `bin_dirs = ["/usr/lib/cni"]`},
					struct{ table, line string }{images, `snapshotter = "overlayfs"`},
					struct{ table, line string }{images + ".pinned_images", `sandbox = "` + PauseImage + `"`},
					struct{ table, line string }{`"io.containerd.nri.v1.nri"`, ``},
				)
				cdi := `cdi_spec_dirs = ["` + c.CDISpecDir() + `"]`
				if podCIDRFromRuntime {
					cdi = `cdi_spec_dirs = ["` + c.CDISpecDir() + `", "` + extraCDI + `"]`
				}
				want = append(want, struct{ table, line string }{cri, cdi})
			} else {
				want = append(want,
					struct{ table, line string }{cri + ".cni", `bin_dir = "/usr/lib/cni"`},
					struct{ table, line string }{cri + ".containerd", `snapshotter = "overlayfs"`},
					struct{ table, line string }{cri, `sandbox_image = "` + PauseImage + `"`},
				)
			}
			if podCIDRFromRuntime {
				want = append(want, struct{ table, line string }{cri + ".cni", `conf_template = "` + filepath.Join(dir, "cni", "conf-template.json") + `"`})
			}
			for _, w := range want {
				body, ok := tomlTable(dump, w.table)
				if w.line == "" {
					// A disabled plugin has no table in the dump.
					if ok {
						t.Errorf("plugin %s is configured, want it disabled", w.table)
					}
					continue
				}
				if !ok {
					t.Errorf("no table [plugins.%s] in the dump", w.table)
					continue
				}
				if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(w.line) + `\s*$`).MatchString(body) {
					t.Errorf("[plugins.%s] lacks %s:\n%s", w.table, w.line, body)
				}
			}
			for _, p := range []string{"aufs", "btrfs", "devmapper", "zfs"} {
				if _, ok := tomlTable(dump, `"io.containerd.snapshotter.v1.`+p+`"`); ok {
					t.Errorf("snapshotter %s is configured, want it disabled", p)
				}
			}
			if t.Failed() {
				t.Logf("containerd config dump:\n%s", out)
			}
		})
	}
}

// tomlTable returns the key lines of table [plugins.<name>] of a TOML
// document as containerd dumps it, up to the next table header.
func tomlTable(doc, name string) (string, bool) {
	header := "[plugins." + name + "]"
	var body []string
	in, found := false, false
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") {
			in = trimmed == header
			found = found || in
			continue
		}
		if in {
			body = append(body, line)
		}
	}
	return strings.Join(body, "\n"), found
}

// TestCNIConfigRanges checks the CNI configuration of an instance with
// more than one pod subnet: one range set (one address per pod) holding
// every subnet as a range, in order, so host-local moves on to the next
// when one is full.
func TestCNIConfigRanges(t *testing.T) {
	var subnets []*net.IPNet
	for _, s := range []string{"10.250.7.0/24", "10.250.31.0/24", "10.250.2.0/24"} {
		_, n, _ := net.ParseCIDR(s)
		subnets = append(subnets, n)
	}
	for _, tc := range []struct {
		name string
		c    *Containerd
		want []string
	}{
		{"one subnet", &Containerd{Subnet: subnets[0]}, []string{"10.250.7.0/24"}},
		{"extra subnets", &Containerd{Subnet: subnets[0], Subnets: subnets}, []string{"10.250.7.0/24", "10.250.31.0/24", "10.250.2.0/24"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "net.conflist")
			vals := map[string]string{"Network": "n", "Bridge": "b", "IPAMDir": "/x", "SubnetRanges": subnetRanges(tc.c.subnets())}
			if err := writeTemplate(path, cniTemplate, vals); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var conf struct {
				Plugins []struct {
					IPAM struct {
						Ranges [][]struct {
							Subnet string `json:"subnet"`
						} `json:"ranges"`
					} `json:"ipam"`
				} `json:"plugins"`
			}
			if err := json.Unmarshal(data, &conf); err != nil {
				t.Fatalf("the CNI config is not JSON: %v\n%s", err, data)
			}
			if len(conf.Plugins) == 0 || len(conf.Plugins[0].IPAM.Ranges) != 1 {
				t.Fatalf("want one range set, got %s", data)
			}
			var got []string
			for _, r := range conf.Plugins[0].IPAM.Ranges[0] {
				got = append(got, r.Subnet)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ranges = %v, want %v", got, tc.want)
			}
		})
	}
}
