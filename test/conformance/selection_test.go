package conformance

import (
	"regexp"
	"strings"
	"testing"
)

// TestNetworkSkips checks that skips.yaml parses, that every entry has its
// reason (YAML aliases included), that the network suite's entries, if
// any, are skipped on both agents, and that no DNS spec is skipped.
func TestNetworkSkips(t *testing.T) {
	entries, err := SkipList()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.TrimSpace(e.Reason) == "" {
			t.Errorf("%q: no reason", e.Name)
		}
		if strings.HasPrefix(e.Name, "[sig-network]") {
			if !e.AppliesTo(AgentNodelet) || !e.AppliesTo(AgentKubelet) {
				t.Errorf("%q: a network skip must hold for both agents", e.Name)
			}
		}
		// The DNS specs' probe images (agnhost with dig and getent,
		// glibc-dns-testing) are built: both agents run them.
		if strings.HasPrefix(e.Name, "[sig-network] DNS ") {
			t.Errorf("%q is skipped, but its probe images are built", e.Name)
		}
	}
}

// TestNetworkSelection checks which spec names the network suite's focus
// and skip expressions select.
func TestNetworkSelection(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [Conformance] [NodeConformance]", true},
		{"[sig-network] Networking Granular Checks: Services should function for pod-Service: http", true},
		{"[sig-network] Services should serve a basic endpoint from pods [Conformance]", true},
		{"[sig-network] DNS should support configurable pod DNS nameservers [Conformance]", true},
		{"[sig-network] Services should be able to change the type to LoadBalancer [Slow]", false},
		{"[sig-network] Networking IPerf2 [Feature:Networking-Performance] should run iperf2", false},
		{"[sig-network] Services should have a working scale subresource [Conformance] SCTP", false},
		{"[sig-network] NetworkPolicy API should support creating NetworkPolicy API operations [Conformance]", false},
		{"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]", false},
	}
	skip := append(append([]string{}, ConformanceSkip...), NetworkSkip...)
	for _, tt := range tests {
		got := matchAny(NetworkFocus, tt.name) && !matchAny(skip, tt.name)
		if got != tt.want {
			t.Errorf("%q: selected %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, f := range NetworkSmokeFocus {
		if !matchAny(NetworkFocus, regexp.MustCompile(`\\(.)`).ReplaceAllString(f, "$1")) {
			t.Errorf("smoke spec %q is outside NetworkFocus", f)
		}
	}
}

// TestDRASelection checks which spec names (Kubernetes 1.37's, as the
// dry run prints them) the DRA suite's focus and skip expressions select.
func TestDRASelection(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] registers plugin", true},
		{"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] on single node supports claim and class parameters", true},
		{"[sig-node] [DRA] control plane supports claim and class parameters", true},
		{"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] sequential update with pods replacing each other [KubeletMinVersion:1.33] [Slow]", true},
		{"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:DRAPartitionableDevices] must consume and free up counters [Beta] [FeatureGate:DynamicResourceAllocation]", true},
		{"[sig-node] [DRA] CRUD Tests resource.k8s.io/v1 ResourceClaim [Conformance]", true},
		{"[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a ResourceClaim [FeatureGate:DynamicResourceAllocation] [DRA]", true},
		// Serial.
		{"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] on single node supports extended resources together with ResourceClaim [Serial]", false},
		// Gates off by default.
		{"[sig-node] [DRA] CRUD Tests resource.k8s.io/v1alpha3 ResourcePoolStatusRequest [FeatureGate:DRAResourcePoolStatus] [Alpha] [Feature:OffByDefault] [FeatureGate:DynamicResourceAllocation]", false},
		{"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] [FeatureGate:GenericWorkload] [FeatureGate:DRAWorkloadResourceClaims] [KubeletMinVersion:1.36] allocates devices for PodGroups [Beta] [Feature:OffByDefault] [FeatureGate:DynamicResourceAllocation]", false},
		// Two nodes.
		{"[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] on multiple nodes with node-local resources uses all resources", false},
		{"[sig-node] [DRA] control plane with different ResourceSlices keeps pod pending because of CEL runtime errors", false},
		// Not DRA.
		{"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]", false},
	}
	for _, tt := range tests {
		got := matchAny(DRAFocus, tt.name) && !matchAny(DRASkip, tt.name)
		if got != tt.want {
			t.Errorf("%q: selected %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSkipEntriesIn checks that a suite's summary counts its own entries
// of the skip list: the storage entries are not the node suite's.
func TestSkipEntriesIn(t *testing.T) {
	entries, err := SkipList()
	if err != nil {
		t.Fatal(err)
	}
	storage := SkipEntriesIn(entries, StorageFocus)
	node := SkipEntriesIn(entries, ConformanceFocus)
	if len(storage) == 0 || len(node) == 0 {
		t.Fatalf("%d storage and %d node entries, want some of each", len(storage), len(node))
	}
	if len(storage)+len(node) > len(entries) {
		t.Errorf("%d storage and %d node entries of %d: some counted twice", len(storage), len(node), len(entries))
	}
	for _, e := range storage {
		if !strings.HasPrefix(e.Name, "[sig-storage] CSI Mock") {
			t.Errorf("%q counted as a storage suite entry", e.Name)
		}
	}
}

// matchAny reports whether one of the regular expressions exprs matches
// name, as ginkgo's --focus and --skip do.
func matchAny(exprs []string, name string) bool {
	for _, e := range exprs {
		if regexp.MustCompile(e).MatchString(name) {
			return true
		}
	}
	return false
}
