package utils

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// MustStartContainerd starts a containerd for the enclosing suite or spec,
// fails it when that does not work, and stops the containerd in DeferCleanup.
func MustStartContainerd(ctx context.Context, opts ContainerdOptions) *Containerd {
	GinkgoHelper()
	c, err := StartContainerd(ctx, opts)
	Expect(err).NotTo(HaveOccurred(), "starting containerd")
	GinkgoWriter.Printf("containerd %s: endpoint %s, subnet %s, log %s\n", c.Network, c.Endpoint(), c.Subnet, c.LogPath())
	DeferCleanup(c.Stop)
	return c
}

// MustStartAPIServer starts an envtest API server for the enclosing suite or
// spec, fails it when that does not work, and stops it in DeferCleanup.
func MustStartAPIServer(ctx context.Context) *APIServer {
	GinkgoHelper()
	a, err := StartAPIServer(ctx)
	Expect(err).NotTo(HaveOccurred(), "starting the API server")
	DeferCleanup(a.Stop)
	return a
}

// MustStartRegistry starts a registry for the enclosing suite or spec, fails
// it when that does not work, and stops it in DeferCleanup.
func MustStartRegistry(ctx context.Context, opts RegistryOptions) *Registry {
	GinkgoHelper()
	r, err := StartRegistry(ctx, opts)
	Expect(err).NotTo(HaveOccurred(), "starting the registry")
	DeferCleanup(r.Stop)
	return r
}
