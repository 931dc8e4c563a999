package cri

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStreamingCallsRefuseForeignObjects(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func(c *Client) error
	}{
		{"exec in another node's container", func(c *Client) error {
			_, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "other-node-c", Cmd: []string{"true"}, Stdout: true})
			return err
		}},
		{"attach to an unlabelled container", func(c *Client) error {
			_, err := c.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "kubelet-c", Stdout: true})
			return err
		}},
		{"port forward to another node's sandbox", func(c *Client) error {
			_, err := c.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "other-node-sb", Port: []int32{80}})
			return err
		}},
		{"read the log of an unlabelled container", func(c *Client) error {
			return c.ReadLogs(ctx, "/nonexistent", "kubelet-c", nil, nil, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, rs, _ := newTestClient(t)
			foreignObjects(rs)
			g.Expect(tc.call(c)).To(MatchError(ErrNotOwned))
			for _, call := range rs.GetCalls() {
				g.Expect(call).NotTo(BeElementOf("Exec", "Attach", "PortForward"), "the runtime was asked")
			}
		})
	}
}

func TestStreamingCallsPassOwnedObjectsThrough(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _, _ := newTestClient(t)
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())
	id, err := c.CreateContainer(ctx, sb, containerConfig("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdout: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{80}})
	g.Expect(err).NotTo(HaveOccurred())
}
