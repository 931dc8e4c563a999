package e2e

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/containerlogs"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// besideNode is the node of the spec of nodelet beside a kubelet's
	// pods.
	besideNode = "e2e-beside"
	// besideHousekeepingPeriod is nodelet's pod housekeeping period: how
	// often podLogsDir and kubepods are swept for what gone pods left.
	besideHousekeepingPeriod = 15 * time.Second
	// besideLogInterval is the log manager's, which sweeps the links.
	besideLogInterval = 3 * time.Second
)

// nodelet configured as docs/deploying.md has it beside a kubelet: a
// cgroupRoot of its own (the harness's, under /nodelet-e2e), and the pod
// log and links directories where the kubelet keeps its own (the
// harness's directories stand for /var/log/pods and /var/log/containers).
var _ = Describe("Beside a kubelet", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: besideNode, API: apiServer, Containerd: ctrd,
			Config: map[string]any{"containerLogMonitorInterval": besideLogInterval.String()}}
	})

	It("removes only the pod log directories, log links and pod cgroups it made", func(ctx SpecContext) {
		n := env.Nodelet
		besteffort := n.CgroupRoot + "/kubepods/besteffort"
		ns := utils.NewNamespace(ctx, env.Admin)

		By("running two pods of nodelet's")
		type ownPod struct{ uid, logDir, link, cgroup string }
		var own []ownPod
		for _, name := range []string{"own", "old"} {
			createPod(ctx, env.Admin, utils.BusyboxPod(ns, name, besideNode, "sleep", "3600"))
			p := utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(utils.PodReady(p)).To(BeTrue())
			})
			id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
			own = append(own, ownPod{
				uid:    string(p.UID),
				logDir: filepath.Join(n.PodLogsDir, ns+"_"+name+"_"+string(p.UID)),
				link:   filepath.Join(n.ContainerLogLinksDir, containerlogs.LinkName(name, ns, "main", id)),
				cgroup: besteffort + "/pod" + string(p.UID),
			})
		}
		for _, p := range own {
			Eventually(func() (string, error) { return os.Readlink(p.link) }).WithTimeout(apiTimeout).WithPolling(pollInterval).
				Should(HavePrefix(p.logDir + "/"))
			Expect(containerlogs.PodDirOwner(p.logDir)).To(Equal(besideNode), "nodelet marks the pod log directories it makes")
			Expect(utils.CgroupDirs(p.cgroup)).NotTo(BeEmpty())
		}
		By("leaving what a kubelet's running pod has where nodelet looks: a log directory, a log link, a pod cgroup with a process in it")
		kuid := string(uuid.NewUUID())
		kubeletLog := filepath.Join(n.PodLogsDir, ns+"_kubelet-pod_"+kuid, "main", "0.log")
		Expect(os.MkdirAll(filepath.Dir(kubeletLog), 0o755)).To(Succeed())
		Expect(os.WriteFile(kubeletLog, []byte("2026-01-01T00:00:00.000000000Z stdout F hello from the kubelet's pod\n"), 0o640)).To(Succeed())
		kubeletLink := filepath.Join(n.ContainerLogLinksDir, containerlogs.LinkName("kubelet-pod", ns, "main", strings.Repeat("c", 64)))
		Expect(os.Symlink(kubeletLog, kubeletLink)).To(Succeed())
		kubeletCgroup := besteffort + "/pod" + kuid
		DeferCleanup(utils.RemoveCgroupTree, kubeletCgroup)
		// Where the runtime puts a pod: the cpu, memory and pids
		// controllers on cgroup v1, the unified hierarchy on v2.
		hierarchies := []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"}
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			hierarchies = []string{"/sys/fs/cgroup"}
		}
		for _, h := range hierarchies {
			if err := os.Mkdir(filepath.Join(h, kubeletCgroup), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				Fail(err.Error())
			}
		}
		sleep := exec.Command("sleep", "3600")
		Expect(sleep.Start()).To(Succeed())
		DeferCleanup(func() {
			_ = sleep.Process.Kill()
			_ = sleep.Wait()
		})
		pid := strconv.Itoa(sleep.Process.Pid)
		for _, h := range hierarchies {
			Expect(os.WriteFile(filepath.Join(h, kubeletCgroup, "cgroup.procs"), []byte(pid), 0o644)).To(Succeed())
		}
		inKubeletCgroup := func(g Gomega) {
			data, err := os.ReadFile("/proc/" + pid + "/cgroup")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).To(ContainSubstring(kubeletCgroup), "the kubelet's pod process stays in its cgroup")
		}
		inKubeletCgroup(Default)

		By("leaving orphans of nodelet's own: its pods deleted and their runtime objects removed while it is down")
		Expect(n.Kill()).To(Succeed())
		// The second one as a pod run before nodelet marked its log
		// directories: nodelet knows it by its checkpoint.
		Expect(os.Remove(filepath.Join(own[1].logDir, containerlogs.PodDirMarker))).To(Succeed())
		rs, _ := newCRIClients(ctx)
		for _, p := range own {
			sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": p.uid}})
			Expect(err).NotTo(HaveOccurred())
			Expect(sandboxes).NotTo(BeEmpty())
			for _, sb := range sandboxes {
				Expect(utils.RemoveSandbox(ctx, rs, sb.GetId())).To(Succeed())
			}
		}
		for _, name := range []string{"own", "old"} {
			pod := &corev1.Pod{}
			pod.Namespace, pod.Name = ns, name
			Expect(env.Admin.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Expect(n.Restart(ctx)).To(Succeed())

		By("removing nodelet's orphans: log directories, links, cgroups, checkpoints")
		Eventually(func(g Gomega) {
			for _, p := range own {
				g.Expect(p.logDir).NotTo(BeADirectory())
				_, err := os.Lstat(p.link)
				g.Expect(err).To(MatchError(fs.ErrNotExist), "link %s", p.link)
				g.Expect(utils.CgroupDirs(p.cgroup)).To(BeEmpty())
				g.Expect(filepath.Join(n.RootDir, "checkpoints", "pod-"+p.uid)).NotTo(BeAnExistingFile())
			}
		}).WithContext(ctx).WithTimeout(besideHousekeepingPeriod + apiTimeout).WithPolling(pollInterval).Should(Succeed())

		By("leaving the kubelet's pod alone for two sweep periods")
		Consistently(func(g Gomega) {
			g.Expect(kubeletLog).To(BeARegularFile())
			target, err := os.Readlink(kubeletLink)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(target).To(Equal(kubeletLog))
			g.Expect(utils.CgroupDirs(kubeletCgroup)).NotTo(BeEmpty())
			g.Expect(processAlive(sleep.Process.Pid)).To(BeTrue(), "the kubelet's pod process is not killed")
			inKubeletCgroup(g)
		}).WithContext(ctx).WithTimeout(2*besideHousekeepingPeriod + besideLogInterval).WithPolling(time.Second).Should(Succeed())
		Expect(containerlogs.PodDirOwner(filepath.Dir(filepath.Dir(kubeletLog)))).To(BeEmpty(), "nor marked as nodelet's")
	}, SpecTimeout(5*time.Minute))
})
