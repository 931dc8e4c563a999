package utils

import (
	"net"
	"reflect"
	"testing"
)

func TestPlanRoutes(t *testing.T) {
	cidr := func(s string) *net.IPNet {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	node := func(i int, pods string) *NetNode {
		n := &NetNode{Index: i, Namespace: namespaceName(7, i), IP: net.IPv4(10, 251, 7, byte(10+i)).To4()}
		if pods != "" {
			n.PodCIDR = cidr(pods)
		}
		return n
	}
	tests := []struct {
		name  string
		nodes []*NetNode
		want  routePlan
	}{
		{name: "no nodes"},
		{name: "no pod subnet allocated yet", nodes: []*NetNode{node(1, ""), node(2, "")}},
		{
			name:  "one node: only the host routes to it",
			nodes: []*NetNode{node(1, "10.244.0.0/24")},
			want:  routePlan{{Dst: "10.244.0.0/24", Via: "10.251.7.11"}},
		},
		{
			name:  "two nodes: the host and the other node route to each",
			nodes: []*NetNode{node(2, "10.244.1.0/24"), node(1, "10.244.0.0/24")},
			want: routePlan{
				{Dst: "10.244.0.0/24", Via: "10.251.7.11"},
				{Dst: "10.244.1.0/24", Via: "10.251.7.12"},
				{Namespace: "nlnet7-node1", Dst: "10.244.1.0/24", Via: "10.251.7.12"},
				{Namespace: "nlnet7-node2", Dst: "10.244.0.0/24", Via: "10.251.7.11"},
			},
		},
		{
			name:  "a node without a subnet is routed to by none but routes to the others",
			nodes: []*NetNode{node(1, "10.244.0.0/24"), node(2, "")},
			want: routePlan{
				{Dst: "10.244.0.0/24", Via: "10.251.7.11"},
				{Namespace: "nlnet7-node2", Dst: "10.244.0.0/24", Via: "10.251.7.11"},
			},
		},
		{
			name: "another agent's Node on a node's address: its subnet routed to that node too",
			nodes: func() []*NetNode {
				n1, n2 := node(1, "10.244.0.0/24"), node(2, "")
				n2.OtherPodCIDRs = map[string]*net.IPNet{"n2-nodelet": cidr("10.244.3.0/24")}
				return []*NetNode{n1, n2}
			}(),
			want: routePlan{
				{Dst: "10.244.0.0/24", Via: "10.251.7.11"},
				{Dst: "10.244.3.0/24", Via: "10.251.7.12"},
				{Namespace: "nlnet7-node1", Dst: "10.244.3.0/24", Via: "10.251.7.12"},
				{Namespace: "nlnet7-node2", Dst: "10.244.0.0/24", Via: "10.251.7.11"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planRoutes(tt.nodes); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("planRoutes() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDiffRoutes(t *testing.T) {
	a := route{Dst: "10.244.0.0/24", Via: "10.251.7.11"}
	aMoved := route{Dst: "10.244.0.0/24", Via: "10.251.7.13"}
	b := route{Namespace: "nlnet7-node1", Dst: "10.244.1.0/24", Via: "10.251.7.12"}
	tests := []struct {
		name                string
		have, want          routePlan
		wantAdd, wantRemove routePlan
	}{
		{name: "nothing"},
		{name: "all new", want: routePlan{a, b}, wantAdd: routePlan{a, b}},
		{name: "in place", have: routePlan{a, b}, want: routePlan{a, b}},
		{name: "gone", have: routePlan{a, b}, want: routePlan{a}, wantRemove: routePlan{b}},
		{name: "moved to another node: replaced, not removed", have: routePlan{a}, want: routePlan{aMoved}, wantAdd: routePlan{aMoved}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			add, remove := diffRoutes(tt.have, tt.want)
			if !reflect.DeepEqual(add, tt.wantAdd) || !reflect.DeepEqual(remove, tt.wantRemove) {
				t.Errorf("diffRoutes() = add %+v remove %+v, want add %+v remove %+v", add, remove, tt.wantAdd, tt.wantRemove)
			}
		})
	}
}

func TestNodeAddress(t *testing.T) {
	_, subnet, _ := net.ParseCIDR("10.251.3.0/24")
	for i, want := range map[int]string{1: "10.251.3.11", 2: "10.251.3.12", 240: "10.251.3.250"} {
		if got := NodeAddress(subnet, i).String(); got != want {
			t.Errorf("NodeAddress(%s, %d) = %s, want %s", subnet, i, got, want)
		}
	}
}
