package options

import (
	"path/filepath"
	"strings"
	"testing"
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
	}{
		{
			name: "eks-al2023", config: "config.json", configDir: "config.json.d",
			// nodelet refuses this today; the drop-in work removes it
			wantErr: "unknown flag: --runtime-cgroups",
		},
		{
			name: "gce-kube-up", config: "config.yaml", nodeName: "kubernetes-minion-group-7xkz",
			// nodelet refuses this today; the drop-in work removes it
			wantErr: "unknown flag: --experimental-mounter-path",
		},
		{
			name: "aks-ubuntu", config: "config.json", nodeName: "aks-nodepool1-12345678-vmss000000",
			// nodelet refuses this today; the drop-in work removes it
			wantErr: "unknown flag: --enable-server",
		},
		{
			name: "k3s", configDir: "kubelet.conf.d",
			// nodelet refuses this today; the drop-in work removes it
			wantErr: "unknown flag: --config-dir",
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
