package utils

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

func TestSubnetSlots(t *testing.T) {
	for _, tc := range []struct {
		opts    ContainerdOptions
		want    int
		wantErr bool
	}{
		{ContainerdOptions{}, 1, false},
		{ContainerdOptions{PodAddresses: 253}, 1, false},
		{ContainerdOptions{PodAddresses: 254}, 2, false},
		{ContainerdOptions{PodAddresses: 500}, 2, false},
		{ContainerdOptions{PodAddresses: 509}, 2, false},
		{ContainerdOptions{PodAddresses: 510}, 4, false},
		{ContainerdOptions{PodAddresses: 1021}, 4, false},
		{ContainerdOptions{PodAddresses: 1022}, 0, true},
		{ContainerdOptions{PodAddresses: 500, PodCIDRFromRuntime: true}, 0, true},
		{ContainerdOptions{PodAddresses: 100, PodCIDRFromRuntime: true}, 1, false},
	} {
		got, err := subnetSlots(tc.opts)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("subnetSlots(%+v) = %d, %v; want %d, error %v", tc.opts, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestAcquireSlots takes slots as a containerd does, one for a /24 and
// blocks for a larger pod subnet: slots that follow each other from a
// number the block's size divides, each held until released.
func TestAcquireSlots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("slot locks live under /run: needs root")
	}
	dir := filepath.Join(os.TempDir(), instanceDirPrefix+"slot-block-test")
	for _, count := range []int{1, 2, 4} {
		held, err := acquireSlots(dir, count)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != count || held[0].n%count != 0 {
			t.Fatalf("block of %d: slots %v", count, slotNumbers(held))
		}
		for i, s := range held {
			if s.n != held[0].n+i {
				t.Errorf("block of %d: slots %v do not follow each other", count, slotNumbers(held))
			}
		}
		// Held: no other taker gets them.
		for _, s := range held {
			if other, err := takeSlot(dir+"-other", s.n); other != nil || err != nil {
				t.Errorf("slot %d taken twice (%v)", s.n, err)
				other.release()
			}
		}
		releaseAll(held)
	}
}

func slotNumbers(slots []*slot) []int {
	var out []int
	for _, s := range slots {
		out = append(out, s.n)
	}
	return out
}
