package conformance

import (
	"slices"
	"strings"
	"testing"
)

func TestGinkgoArgsNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
		want  string // "" for no --num-nodes at all
	}{
		{"unset", 0, ""},
		{"one node", 1, "--num-nodes=1"},
		{"a multi-node cluster", 3, "--num-nodes=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := ginkgoArgs(RunOptions{BinDir: "/bin", Kubeconfig: "/k", Nodes: tc.nodes})
			sep := slices.Index(args, "--")
			if sep < 0 {
				t.Fatalf("no -- between ginkgo's flags and the e2e framework's: %v", args)
			}
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--num-nodes=") })
			switch {
			case tc.want == "" && i >= 0:
				t.Errorf("got %s, want no --num-nodes", args[i])
			case tc.want != "" && i < 0:
				t.Errorf("no --num-nodes, want %s: %v", tc.want, args)
			case tc.want != "" && (args[i] != tc.want || i < sep):
				t.Errorf("got %s at %d (the e2e framework's flags start at %d), want %s after --", args[i], i, sep, tc.want)
			}
		})
	}
}

func TestGinkgoArgsKubeletRootDir(t *testing.T) {
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"the e2e framework's default", "", ""},
		{"the node agent's", "/tmp/n/root", "--kubelet-root-dir=/tmp/n/root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := ginkgoArgs(RunOptions{BinDir: "/bin", Kubeconfig: "/k", KubeletRootDir: tc.dir})
			sep := slices.Index(args, "--")
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--kubelet-root-dir=") })
			switch {
			case tc.want == "" && i >= 0:
				t.Errorf("got %s, want none", args[i])
			case tc.want != "" && (i < sep || args[i] != tc.want):
				t.Errorf("got %v, want %s after --", args, tc.want)
			}
		})
	}
}
