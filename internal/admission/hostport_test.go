package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func ports(ps ...v1.ContainerPort) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers[0].Ports = ps }
}

func port(hostIP string, hostPort int32, proto v1.Protocol) v1.ContainerPort {
	return v1.ContainerPort{ContainerPort: 80, HostIP: hostIP, HostPort: hostPort, Protocol: proto}
}

func TestHostPortConflicts(t *testing.T) {
	cases := []struct {
		name    string
		running v1.ContainerPort
		want    v1.ContainerPort
		wantMsg string // empty: admitted
	}{
		{name: "same wildcard port", running: port("", 8080, ""), want: port("", 8080, ""),
			wantMsg: "TCP/0.0.0.0:8080"},
		{name: "wildcard then specific address", running: port("0.0.0.0", 8080, v1.ProtocolTCP), want: port("10.0.0.1", 8080, v1.ProtocolTCP),
			wantMsg: "TCP/10.0.0.1:8080"},
		{name: "specific address then wildcard", running: port("10.0.0.1", 8080, v1.ProtocolTCP), want: port("", 8080, ""),
			wantMsg: "TCP/0.0.0.0:8080"},
		{name: "empty host IP is the wildcard", running: port("", 8080, v1.ProtocolTCP), want: port("10.0.0.1", 8080, ""),
			wantMsg: "TCP/10.0.0.1:8080"},
		{name: "same specific address", running: port("10.0.0.1", 8080, v1.ProtocolUDP), want: port("10.0.0.1", 8080, v1.ProtocolUDP),
			wantMsg: "UDP/10.0.0.1:8080"},
		{name: "two specific addresses", running: port("10.0.0.1", 8080, ""), want: port("10.0.0.2", 8080, "")},
		{name: "different protocols", running: port("", 8080, v1.ProtocolTCP), want: port("", 8080, v1.ProtocolUDP)},
		{name: "wildcard with a different protocol", running: port("0.0.0.0", 53, v1.ProtocolUDP), want: port("10.0.0.1", 53, v1.ProtocolSCTP)},
		{name: "different ports", running: port("", 8080, ""), want: port("10.0.0.1", 8081, "")},
		{name: "container port only", running: port("", 0, ""), want: port("", 0, "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Fits(pod("new", ports(tc.want)), node(110, "2", "4Gi"), []*v1.Pod{pod("old", ports(tc.running))})
			if tc.wantMsg == "" {
				if !got.Admit {
					t.Fatalf("rejected: %s", got.Message)
				}
				return
			}
			want := "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (" + tc.wantMsg + ")"
			if got.Admit || got.Reason != ReasonNodePorts || got.Message != want {
				t.Fatalf("got %+v, want %s %q", got, ReasonNodePorts, want)
			}
		})
	}
}

func TestHostPortOfTerminalPodIsFree(t *testing.T) {
	old := pod("old", ports(port("", 8080, "")), phase(v1.PodSucceeded))
	if got := Fits(pod("new", ports(port("10.0.0.1", 8080, ""))), node(110, "2", "4Gi"), []*v1.Pod{old}); !got.Admit {
		t.Fatalf("rejected: %s", got.Message)
	}
}
