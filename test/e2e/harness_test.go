package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/uuid"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"github.com/nodelet/nodelet/test/utils"
)

var _ = Describe("A containerd instance", func() {
	DescribeTable("keeps containers across a restart and leaves nothing behind when stopped",
		func(ctx SpecContext, daemonDownAtStop bool) {
			c, err := utils.StartContainerd(ctx, utils.ContainerdOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(c.Stop)
			Expect(c.Subnet.String()).NotTo(Equal(ctrd.Subnet.String()), "two instances share a subnet")
			Expect(c.Bridge).NotTo(Equal(ctrd.Bridge))

			rs, err := remote.NewRemoteRuntimeServiceBuilder().
				WithEndpoint(c.Endpoint()).WithConnectionTimeout(criTimeout).Build(ctx)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(rs.Close)

			By("running a sandbox with a long-running container")
			sandboxConfig := &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: "restart", Namespace: "e2e", Uid: string(uuid.NewUUID())},
				Linux:    &runtimeapi.LinuxPodSandboxConfig{},
			}
			sandboxID, err := rs.RunPodSandbox(ctx, sandboxConfig, "")
			Expect(err).NotTo(HaveOccurred())
			containerID, err := rs.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "sleep"},
				Image:    &runtimeapi.ImageSpec{Image: utils.BusyboxImage},
				Command:  []string{"sleep", "3600"},
				Linux:    &runtimeapi.LinuxContainerConfig{},
			}, sandboxConfig)
			Expect(err).NotTo(HaveOccurred())
			Expect(rs.StartContainer(ctx, containerID)).To(Succeed())
			pid := containerPid(ctx, rs, containerID)

			By("restarting the daemon")
			Expect(c.StopProcess()).To(Succeed())
			Expect(c.Running()).To(BeFalse())
			_, err = rs.Version(ctx, "v1")
			Expect(err).To(HaveOccurred(), "the CRI answers while containerd is down")
			Expect(processAlive(pid)).To(BeTrue(), "the container died with the daemon")
			Expect(c.StartProcess(ctx)).To(Succeed())
			Eventually(func(g Gomega) {
				st, err := rs.ContainerStatus(ctx, containerID, false)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.GetStatus().GetState()).To(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))
			}).WithContext(ctx).WithTimeout(containerTimeout).WithPolling(pollInterval).Should(Succeed())

			if daemonDownAtStop {
				Expect(c.StopProcess()).To(Succeed())
			}
			By("stopping the instance")
			Expect(c.Stop()).To(Succeed())
			Expect(c.Stop()).To(Succeed(), "a second Stop")
			Expect(processAlive(pid)).To(BeFalse(), "container process %d survived Stop", pid)
			Expect(processesMentioning(c.Dir)).To(BeEmpty())
			Expect(mountsUnder(c.Dir)).To(BeEmpty())
			_, err = os.Stat(c.Dir)
			Expect(os.IsNotExist(err)).To(BeTrue(), "%s still exists", c.Dir)
			_, err = net.InterfaceByName(c.Bridge)
			Expect(err).To(HaveOccurred(), "bridge %s still exists", c.Bridge)
		},
		Entry("through the CRI while the daemon runs", false, SpecTimeout(2*containerTimeout)),
		Entry("by killing its shims while the daemon is down", true, SpecTimeout(2*containerTimeout)),
	)
})

// containerPid reads the host PID of a running container from the CRI's
// verbose status (containerd puts it in info["info"].pid).
func containerPid(ctx SpecContext, rs internalapi.RuntimeService, id string) int {
	GinkgoHelper()
	st, err := rs.ContainerStatus(ctx, id, true)
	Expect(err).NotTo(HaveOccurred())
	var info struct {
		Pid int `json:"pid"`
	}
	Expect(json.Unmarshal([]byte(st.GetInfo()["info"]), &info)).To(Succeed())
	Expect(info.Pid).To(BeNumerically(">", 0))
	return info.Pid
}

func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && syscall.Kill(pid, 0) == nil
}

// processesMentioning lists the command lines that contain s.
func processesMentioning(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), s) {
			found = append(found, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	Expect(err).NotTo(HaveOccurred())
	var found []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			found = append(found, fields[4])
		}
	}
	return found
}
