package e2e

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/uuid"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"github.com/nodelet/nodelet/test/utils"
)

// criLogLine is one line of a CRI container log: "<RFC3339Nano> <stream> <F|P> <text>".
var criLogLine = regexp.MustCompile(`^(\S+) (stdout|stderr) ([FP]) (.*)$`)

// newCRIClients connects to the suite's containerd and closes the clients
// when the spec ends.
func newCRIClients(ctx SpecContext) (internalapi.RuntimeService, internalapi.ImageManagerService) {
	GinkgoHelper()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(ctrd.Endpoint()).
		WithConnectionTimeout(criTimeout).
		Build(ctx)
	Expect(err).NotTo(HaveOccurred(), "connecting to the CRI runtime service")
	DeferCleanup(rs.Close)
	is, err := remote.NewRemoteImageServiceBuilder().
		WithEndpoint(ctrd.Endpoint()).
		WithConnectionTimeout(criTimeout).
		Build(ctx)
	Expect(err).NotTo(HaveOccurred(), "connecting to the CRI image service")
	DeferCleanup(is.Close)
	return rs, is
}

var _ = Describe("The containerd harness", func() {
	It("runs a sandbox with a pod IP and a busybox container whose log is read back", func(ctx SpecContext) {
		rs, is := newCRIClients(ctx)

		By("finding the imported test images through the CRI")
		for _, image := range utils.TestImages {
			st, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.GetImage()).NotTo(BeNil(), "image %s", image)
		}

		By("running a pod sandbox")
		logDir := GinkgoT().TempDir()
		sandboxConfig := &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{
				Name: "smoke", Namespace: "e2e", Uid: string(uuid.NewUUID()),
			},
			Hostname:     "smoke",
			LogDirectory: logDir,
			Labels:       map[string]string{"nodelet.io/test": "smoke"},
			Linux:        &runtimeapi.LinuxPodSandboxConfig{},
		}
		sandboxID, err := rs.RunPodSandbox(ctx, sandboxConfig, "")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(rs.StopPodSandbox(ctx, sandboxID)).To(Succeed())
			Expect(rs.RemovePodSandbox(ctx, sandboxID)).To(Succeed())
		})

		sandbox, err := rs.PodSandboxStatus(ctx, sandboxID, false)
		Expect(err).NotTo(HaveOccurred())
		Expect(sandbox.GetStatus().GetState()).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY))
		ip := net.ParseIP(sandbox.GetStatus().GetNetwork().GetIp())
		Expect(ip).NotTo(BeNil(), "sandbox has no IP")
		Expect(ctrd.Subnet.Contains(ip)).To(BeTrue(), "sandbox IP %s outside %s", ip, ctrd.Subnet)

		By("running a busybox container that echoes a line")
		const line = "hello from nodelet"
		containerID, err := rs.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "echo"},
			Image:    &runtimeapi.ImageSpec{Image: utils.BusyboxImage},
			Command:  []string{"sh", "-c", "echo " + line},
			LogPath:  filepath.Join("echo", "0.log"),
			Linux:    &runtimeapi.LinuxContainerConfig{},
		}, sandboxConfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(rs.StartContainer(ctx, containerID)).To(Succeed())

		Eventually(func(g Gomega) {
			st, err := rs.ContainerStatus(ctx, containerID, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.GetStatus().GetState()).To(Equal(runtimeapi.ContainerState_CONTAINER_EXITED))
			g.Expect(st.GetStatus().GetExitCode()).To(BeZero())
		}).WithContext(ctx).WithTimeout(containerTimeout).WithPolling(pollInterval).Should(Succeed())

		By("reading the line back from the CRI log file")
		data, err := os.ReadFile(filepath.Join(logDir, "echo", "0.log"))
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		Expect(lines).To(HaveLen(1), "log: %q", data)
		m := criLogLine.FindStringSubmatch(lines[0])
		Expect(m).NotTo(BeNil(), "not a CRI log line: %q", lines[0])
		Expect(m[2]).To(Equal("stdout"))
		Expect(m[3]).To(Equal("F"))
		Expect(m[4]).To(Equal(line))

		By("removing the container")
		Expect(rs.RemoveContainer(ctx, containerID)).To(Succeed())
		containers, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandboxID})
		Expect(err).NotTo(HaveOccurred())
		Expect(containers).To(BeEmpty())
	})
})
