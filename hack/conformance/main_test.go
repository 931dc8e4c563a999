package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/conformance"
)

func TestSelectionStorage(t *testing.T) {
	skips := []conformance.SkipEntry{
		{Name: "[sig-storage] CSI Mock volume expansion X", Reason: "r"},
		{Name: "[sig-storage] CSI Mock Y", Reason: "r", Agents: []conformance.Agent{conformance.AgentKubelet}},
	}
	tests := []struct {
		name  string
		o     options
		agent conformance.Agent
		// runs and skipped are spec names the selection must run and
		// must not run.
		runs, skipped []string
	}{
		{
			name:  "the mock specs, [Slow] ones too",
			o:     options{suite: "storage"},
			agent: conformance.AgentNodelet,
			runs: []string{
				"[sig-storage] CSI Mock volume node stage CSI NodeStage error cases [Slow] should retry NodeStage after NodeStage final error",
				"[sig-storage] CSI Mock workload info CSI workload information using mock driver should be passed when podInfoOnMount=true",
				"[sig-storage] CSI Mock Y",
			},
			skipped: []string{
				"[sig-storage] CSI Mock volume expansion X",
				"[sig-storage] CSI Mock when kubelet restart [Serial] should work",
				"[sig-storage] CSI Mock volume snapshot CSI Volume Snapshots [Feature:VolumeSnapshotDataSource] volumesnapshotcontent and pvc in Bound state with deletion timestamp set should not get deleted while snapshot finalizer exists",
				"[sig-storage] ConfigMap should be consumable from pods in volume [Conformance] [NodeConformance]",
			},
		},
		{
			name:    "an entry for one agent",
			o:       options{suite: "storage"},
			agent:   conformance.AgentKubelet,
			skipped: []string{"[sig-storage] CSI Mock Y"},
		},
		{
			name:  "the DRA specs on one node",
			o:     options{suite: "dra"},
			agent: conformance.AgentKubelet,
			runs: []string{
				"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] must retry NodePrepareResources",
				"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] sequential update with pods replacing each other [KubeletMinVersion:1.33] [Slow]",
			},
			skipped: []string{
				"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] on multiple nodes with node-local resources uses all resources",
				"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] on single node supports extended resources together with ResourceClaim [Serial]",
				"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]",
				"[sig-storage] CSI Mock workload info Z",
			},
		},
		{
			name:  "our ports of the node suite's device plugin specs",
			o:     options{suite: "deviceplugin"},
			agent: conformance.AgentNodelet,
			runs: []string{
				"[sig-node] Device Plugin [Serial] [Feature:DevicePlugin] DevicePlugin [Serial] [Disruptive] Can schedule a pod that requires a device",
				"[sig-node] POD Resources API [Serial] [Feature:PodResourcesAPI] with the builtin rate limit values [Flaky] should hit throttling when calling podresources List in a tight loop",
			},
			skipped: []string{
				"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]",
				"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] must retry NodePrepareResources",
			},
		},
		{
			name:    "an explicit focus keeps the skips",
			o:       options{suite: "storage", focus: []string{`CSI Mock volume expansion`}},
			agent:   conformance.AgentNodelet,
			skipped: []string{"[sig-storage] CSI Mock volume expansion X", "[sig-storage] CSI Mock workload info Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := selection(tt.o, skips, tt.agent)
			for _, n := range tt.runs {
				if !selects(s, n) {
					t.Errorf("does not run %q (focus %v, skip %v)", n, s.focus, s.skip)
				}
			}
			for _, n := range tt.skipped {
				if selects(s, n) {
					t.Errorf("runs %q", n)
				}
			}
		})
	}
}

// selects is ginkgo's rule: a spec runs when a focus matches and no skip.
func selects(s selected, name string) bool {
	match := func(res []string) bool {
		return slices.ContainsFunc(res, func(re string) bool { return regexp.MustCompile(re).MatchString(name) })
	}
	return match(s.focus) && !match(s.skip)
}

func TestReportDir(t *testing.T) {
	now := time.Date(2026, 11, 25, 19, 4, 5, 0, time.UTC)
	tmp := os.TempDir()
	for _, c := range []struct{ out, suite, want string }{
		{"", "node", filepath.Join(tmp, "nodelet-conformance-20261125-190405")},
		{"", "storage", filepath.Join(tmp, "nodelet-conformance-storage-20261125-190405")},
		{"/r", "node", "/r"},
		{"/r", "storage", "/r/storage"},
		{"/r", "network", "/r/network"},
	} {
		if got := reportDir(c.out, c.suite, now); got != c.want {
			t.Errorf("reportDir(%q, %q) = %q, want %q", c.out, c.suite, got, c.want)
		}
	}
}

// TestAgentDir checks that the DRA suite's agent directories are short
// enough for the longest DRA socket of the specs (a rolling update's, 89
// bytes past the root) under the kubelet's root, <dir>/root.
func TestAgentDir(t *testing.T) {
	const longestSocketPastRoot = len("/plugins/gpu.dra-example-driver.sigs.k8s.io/dra-a2d8fac4-a22b-4723-b28c-e461b2f9096a.sock")
	short := filepath.Join(t.TempDir(), "kd")
	dir, err := agentDir("dra", "nlk-", short)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("%s: not a directory (%v)", dir, err)
	}
	if len(dir) != len(short)+4 {
		t.Errorf("%s: want %s and 4 hex digits", dir, short)
	}
	if got := len("/tmp/kd0000/root") + longestSocketPastRoot; got > 107 {
		t.Errorf("the kubelet's longest DRA socket path has %d bytes, more than a Unix socket's 107", got)
	}
	other, err := agentDir("storage", "nlk-", short)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(other)
	if !strings.HasPrefix(filepath.Base(other), "nlk-") {
		t.Errorf("storage suite's directory %s, want a temporary one named nlk-*", other)
	}
}
