package cri

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestUpdateRuntimeConfig(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)
	cfg := &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.1.0/24"}}

	g.Expect(c.UpdateRuntimeConfig(ctx, cfg)).To(Succeed())
	g.Expect(rs.Called).To(ContainElement("UpdateRuntimeConfig"))

	rs.InjectError("UpdateRuntimeConfig", status.Error(codes.Unavailable, "runtime down"))
	err := c.UpdateRuntimeConfig(ctx, cfg)
	g.Expect(err).To(MatchError(ContainSubstring(`pod CIDR "10.244.1.0/24"`)))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable), "the gRPC status stays reachable")
}
