package podcidr

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestFromNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want []string
	}{
		{name: "no node"},
		{name: "none", node: &corev1.Node{}},
		{name: "podCIDRs", node: &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00:1::/64"}}},
			want: []string{"10.244.1.0/24", "fd00:1::/64"}},
		{name: "only podCIDR", node: &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.2.0/24"}}, want: []string{"10.244.2.0/24"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromNode(tc.node); !slices.Equal(got, tc.want) {
				t.Errorf("FromNode = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDesiredAndShouldSend(t *testing.T) {
	for _, tc := range []struct {
		name       string
		node       []string
		configured string
		sent       string
		want       string
		send       bool
	}{
		{name: "nothing anywhere", want: "", send: false},
		{name: "configured, nothing sent", configured: "10.1.0.0/24", want: "10.1.0.0/24", send: true},
		{name: "configured, already sent", configured: "10.1.0.0/24", sent: "10.1.0.0/24", want: "10.1.0.0/24", send: false},
		{name: "node wins over configured", node: []string{"10.244.3.0/24"}, configured: "10.1.0.0/24", sent: "10.1.0.0/24",
			want: "10.244.3.0/24", send: true},
		{name: "node first seen", node: []string{"10.244.3.0/24"}, want: "10.244.3.0/24", send: true},
		{name: "node unchanged", node: []string{"10.244.3.0/24"}, sent: "10.244.3.0/24", want: "10.244.3.0/24", send: false},
		{name: "node changed", node: []string{"10.244.4.0/24"}, sent: "10.244.3.0/24", want: "10.244.4.0/24", send: true},
		{name: "dual stack joined", node: []string{"10.244.3.0/24", "fd00:3::/64"}, sent: "10.244.3.0/24",
			want: "10.244.3.0/24,fd00:3::/64", send: true},
		{name: "node without CIDRs keeps what was sent", sent: "10.244.3.0/24", want: "", send: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Desired(tc.node, tc.configured)
			if got != tc.want {
				t.Errorf("Desired = %q, want %q", got, tc.want)
			}
			if send := ShouldSend(got, tc.sent); send != tc.send {
				t.Errorf("ShouldSend(%q, %q) = %v, want %v", got, tc.sent, send, tc.send)
			}
		})
	}
}

// recordingRuntime records the pod CIDRs it is sent and fails while fail
// holds errors.
type recordingRuntime struct {
	sent []string
	fail []error
}

func (r *recordingRuntime) UpdateRuntimeConfig(_ context.Context, c *runtimeapi.RuntimeConfig) error {
	if len(r.fail) > 0 {
		err := r.fail[0]
		r.fail = r.fail[1:]
		return err
	}
	r.sent = append(r.sent, c.GetNetworkConfig().GetPodCidr())
	return nil
}

func TestUpdater(t *testing.T) {
	ctx := context.Background()
	rt := &recordingRuntime{}
	u := NewUpdater(rt, "10.1.0.0/24", logr.Discard())

	// The configured value goes first, once.
	for range 2 {
		if _, err := u.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The Node's replaces it, once, and a failure is retried by the
	// next call.
	rt.fail = []error{errors.New("runtime down")}
	if sent, err := u.SetNode(ctx, []string{"10.244.5.0/24"}); err == nil || sent {
		t.Fatalf("SetNode with a failing runtime = %v, %v; want an error", sent, err)
	}
	if u.Sent() != "10.1.0.0/24" {
		t.Fatalf("Sent after a failure = %q, want the configured value still", u.Sent())
	}
	for range 2 {
		if _, err := u.SetNode(ctx, []string{"10.244.5.0/24"}); err != nil {
			t.Fatal(err)
		}
	}
	// A later Sync does not bring the configured value back.
	if sent, err := u.Sync(ctx); err != nil || sent {
		t.Fatalf("Sync after the Node's = %v, %v; want nothing sent", sent, err)
	}
	want := []string{"10.1.0.0/24", "10.244.5.0/24"}
	if !slices.Equal(rt.sent, want) {
		t.Fatalf("runtime was sent %q, want %q", rt.sent, want)
	}
}
