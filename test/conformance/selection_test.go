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
	match := func(exprs []string, name string) bool {
		for _, e := range exprs {
			if regexp.MustCompile(e).MatchString(name) {
				return true
			}
		}
		return false
	}
	skip := append(append([]string{}, ConformanceSkip...), NetworkSkip...)
	for _, tt := range tests {
		got := match(NetworkFocus, tt.name) && !match(skip, tt.name)
		if got != tt.want {
			t.Errorf("%q: selected %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, f := range NetworkSmokeFocus {
		if !match(NetworkFocus, regexp.MustCompile(`\\(.)`).ReplaceAllString(f, "$1")) {
			t.Errorf("smoke spec %q is outside NetworkFocus", f)
		}
	}
}
