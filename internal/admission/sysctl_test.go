package admission

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

func sysctls(names ...string) podOpt {
	return func(p *v1.Pod) {
		sc := &v1.PodSecurityContext{}
		for _, n := range names {
			sc.Sysctls = append(sc.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		p.Spec.SecurityContext = sc
	}
}

func hostNetwork(p *v1.Pod) { p.Spec.HostNetwork = true }
func hostIPC(p *v1.Pod)     { p.Spec.HostIPC = true }

func TestSafeSysctlsPerKernel(t *testing.T) {
	for _, tc := range []struct {
		kernel   string
		has, not []string
	}{
		{"", []string{"kernel.shm_rmid_forced", "net.ipv4.tcp_rmem"}, []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time"}},
		{"3.10.0", []string{"net.ipv4.ping_group_range"}, []string{"net.ipv4.ip_local_reserved_ports"}},
		{"4.5.0", []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_probes"}, []string{"net.ipv4.tcp_fin_timeout"}},
		{"6.1.0", []string{"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl"}, nil},
	} {
		var k *version.Version
		if tc.kernel != "" {
			k = version.MustParseGeneric(tc.kernel)
		}
		got := SafeSysctls(k)
		for _, s := range tc.has {
			if !slices.Contains(got, s) {
				t.Errorf("kernel %q: %s not safe, want safe", tc.kernel, s)
			}
		}
		for _, s := range tc.not {
			if slices.Contains(got, s) {
				t.Errorf("kernel %q: %s safe, want not", tc.kernel, s)
			}
		}
	}
}

func TestSysctlAdmission(t *testing.T) {
	kernel := version.MustParseGeneric("6.1.0")
	cases := []struct {
		name    string
		allowed []string
		pod     *v1.Pod
		wantMsg string // empty: admitted
	}{
		{name: "no security context", pod: pod("p")},
		{name: "safe sysctl", pod: pod("p", sysctls("kernel.shm_rmid_forced", "net.ipv4.tcp_syncookies"))},
		{name: "safe sysctl with slashes", pod: pod("p", sysctls("net/ipv4/ip_local_port_range"))},
		{name: "unsafe sysctl", pod: pod("p", sysctls("net.ipv4.tcp_syncookies", "kernel.msgmax")),
			wantMsg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe sysctl allowed by glob", allowed: []string{"kernel.msg*"}, pod: pod("p", sysctls("kernel.msgmax"))},
		{name: "unsafe sysctl allowed by name", allowed: []string{"net.core.somaxconn"}, pod: pod("p", sysctls("net.core.somaxconn"))},
		{name: "glob does not cover a sibling", allowed: []string{"kernel.msg*"}, pod: pod("p", sysctls("kernel.sem")),
			wantMsg: `forbidden sysctl: "kernel.sem" not allowlisted`},
		{name: "name is not a prefix", allowed: []string{"net.core.somaxconn"}, pod: pod("p", sysctls("net.core.somaxconn2")),
			wantMsg: `forbidden sysctl: "net.core.somaxconn2" not allowlisted`},
		{name: "not namespaced", allowed: []string{"net.*"}, pod: pod("p", sysctls("kernel.panic")),
			wantMsg: `forbidden sysctl: "kernel.panic" not allowlisted`},
		{name: "net sysctl with host network", pod: pod("p", sysctls("net.ipv4.tcp_syncookies"), hostNetwork),
			wantMsg: `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled`},
		{name: "ipc sysctl with host IPC", pod: pod("p", sysctls("kernel.shm_rmid_forced"), hostIPC),
			wantMsg: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc enabled`},
		{name: "net sysctl with host IPC", pod: pod("p", sysctls("net.ipv4.tcp_syncookies"), hostIPC)},
		{name: "allowed glob with host network", allowed: []string{"net.core.*"}, pod: pod("p", sysctls("net.core.somaxconn"), hostNetwork),
			wantMsg: `forbidden sysctl: "net.core.somaxconn" not allowed with host net enabled`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewSysctlAllowlist(kernel, tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			got := Policy{Sysctls: w}.Admit(tc.pod, node(110, "2", "4Gi"), nil)
			if tc.wantMsg == "" {
				if !got.Admit {
					t.Fatalf("rejected: %s: %s", got.Reason, got.Message)
				}
				return
			}
			if got.Admit || got.Reason != ReasonSysctlForbidden || got.Message != tc.wantMsg {
				t.Fatalf("got %+v, want %s %q", got, ReasonSysctlForbidden, tc.wantMsg)
			}
		})
	}
}

func TestZeroPolicyAllowsOnlySafeSysctls(t *testing.T) {
	if got := (Policy{}).Admit(pod("p", sysctls("kernel.shm_rmid_forced")), node(110, "2", "4Gi"), nil); !got.Admit {
		t.Errorf("safe sysctl rejected: %+v", got)
	}
	if got := (Policy{}).Admit(pod("p", sysctls("kernel.msgmax")), node(110, "2", "4Gi"), nil); got.Admit {
		t.Error("unsafe sysctl admitted")
	}
}

func TestNewSysctlAllowlistRefusesBadPatterns(t *testing.T) {
	for _, p := range []string{"*", "kernel.panic", "kernel.*", "net.*.x", "Net.core"} {
		if _, err := NewSysctlAllowlist(nil, []string{p}); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
	for _, p := range []string{"net.*", "kernel.msg*", "kernel.sem", "fs.mqueue.*", "net/core/somaxconn"} {
		if _, err := NewSysctlAllowlist(nil, []string{p}); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
}
