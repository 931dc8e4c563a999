package utils

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	return MustStartAPIServerWithOptions(ctx, APIServerOptions{})
}

// MustStartAPIServerWithOptions is MustStartAPIServer with opts.
func MustStartAPIServerWithOptions(ctx context.Context, opts APIServerOptions) *APIServer {
	GinkgoHelper()
	a, err := StartAPIServerWithOptions(ctx, opts)
	Expect(err).NotTo(HaveOccurred(), "starting the API server")
	DeferCleanup(a.Stop)
	return a
}

// MustStartControllerManager starts a kube-controller-manager for the
// enclosing container or spec, fails it when that does not work, stops it
// in DeferCleanup, and prints the end of its log next to a failed spec.
func MustStartControllerManager(ctx context.Context, api *APIServer, opts ControllerManagerOptions) *Component {
	GinkgoHelper()
	c, err := StartControllerManager(ctx, api, opts)
	Expect(err).NotTo(HaveOccurred(), "starting kube-controller-manager")
	DeferCleanup(c.Stop)
	printLogOnFailure(c)
	return c
}

// MustStartScheduler is MustStartControllerManager for kube-scheduler.
func MustStartScheduler(ctx context.Context, api *APIServer) *Component {
	GinkgoHelper()
	c, err := StartScheduler(ctx, api)
	Expect(err).NotTo(HaveOccurred(), "starting kube-scheduler")
	DeferCleanup(c.Stop)
	printLogOnFailure(c)
	return c
}

// printLogOnFailure prints the end of c's log when the current spec
// failed; registered as a cleanup, it runs before c is stopped and its log
// removed (cleanups run last-in first-out).
func printLogOnFailure(c *Component) {
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("%s log (last 60 lines of %s):\n%s\n", c.Name, c.LogPath, c.LogTail(60))
		}
	})
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

// NodeletSpecs is a nodelet shared by the specs of one Ordered container,
// with the admin client they create objects with. Both are set in the
// container's BeforeAll.
type NodeletSpecs struct {
	Nodelet *Nodelet
	Admin   client.Client
}

// SetUpNodeletSpecs registers, in the Ordered container whose body calls
// it, a BeforeAll that starts a nodelet with the options opts returns (it
// is called then, after the suite's BeforeSuite started the API server and
// containerd) and stops it when the container is done, and a JustAfterEach
// that prints the end of the nodelet's log next to a failed spec.
func SetUpNodeletSpecs(opts func() NodeletOptions) *NodeletSpecs {
	s := &NodeletSpecs{}
	BeforeAll(func(ctx SpecContext) {
		o := opts()
		var err error
		s.Admin, err = o.API.AdminClient()
		Expect(err).NotTo(HaveOccurred(), "creating the admin client")
		s.Nodelet, err = StartNodelet(ctx, o)
		if s.Nodelet != nil {
			DeferCleanup(s.Nodelet.Cleanup)
		}
		Expect(err).NotTo(HaveOccurred(), "starting nodelet")
	})
	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && s.Nodelet != nil {
			GinkgoWriter.Printf("nodelet log (%s):\n%s\n", s.Nodelet.LogPath, s.Nodelet.LogTail(150))
		}
	})
	return s
}

var namespaceCounter atomic.Int32

// NewNamespace creates a namespace for one spec (see CreateNamespace) with
// a name unique in the suite. It is left in place: envtest runs no
// namespace controller that would empty a deleted one, and the specs delete
// the pods whose end they test themselves.
func NewNamespace(ctx context.Context, c client.Client) string {
	GinkgoHelper()
	name := fmt.Sprintf("e2e-%d-%d", GinkgoParallelProcess(), namespaceCounter.Add(1))
	Expect(CreateNamespace(ctx, c, name)).To(Succeed())
	return name
}

// GetPod returns a function for Eventually that reads namespace/name.
func GetPod(ctx context.Context, c client.Client, ns, name string) func(Gomega) *corev1.Pod {
	return func(g Gomega) *corev1.Pod {
		p := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		return p
	}
}

// WaitForPod polls namespace/name until check passes or timeout, and
// returns the pod as last read.
func WaitForPod(ctx context.Context, c client.Client, ns, name string, timeout time.Duration, check func(Gomega, *corev1.Pod)) *corev1.Pod {
	GinkgoHelper()
	var last *corev1.Pod
	Eventually(func(g Gomega) {
		last = GetPod(ctx, c, ns, name)(g)
		check(g, last)
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return last
}
