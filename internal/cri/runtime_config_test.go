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

func TestCgroupDriver(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		linux   *runtimeapi.LinuxRuntimeConfiguration
		err     error
		want    string
		wantErr bool
	}{
		{name: "cgroupfs (containerd 2, SystemdCgroup false)", linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}, want: "cgroupfs"},
		{name: "systemd", linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}, want: "systemd"},
		{name: "no Linux part", want: ""},
		{name: "not implemented (containerd 1.6)", err: status.Error(codes.Unimplemented, "unknown method RuntimeConfig"), want: ""},
		{name: "unknown driver", linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: 7}, wantErr: true},
		{name: "runtime down", err: status.Error(codes.Unavailable, "runtime down"), wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, rs, _ := newTestClient(t)
			rs.FakeLinuxConfiguration = tc.linux
			if tc.err != nil {
				rs.InjectError("RuntimeConfig", tc.err)
			}
			got, err := c.CgroupDriver(ctx)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
