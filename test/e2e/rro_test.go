package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// rroNode is the node the recursive read-only specs' nodelet runs.
	rroNode = "e2e-rro"
	// rroTimeout covers a sandbox and a container, or a refusal.
	rroTimeout = 60 * time.Second
)

// A read-only volume mount is read-only at its top only: a filesystem
// mounted below it on the host stays writable in the container, unless
// the mount is recursively read-only, which the runtime must support
// (containerd 2 on Linux 5.12 or later; containerd 1.6 does not).
var _ = Describe("Recursive read-only mounts", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: rroNode, API: apiServer, Containerd: ctrd}
	})

	supported := func(ctx SpecContext) bool {
		GinkgoHelper()
		rs, _ := newCRIClients(ctx)
		st, err := rs.Status(ctx, false)
		Expect(err).NotTo(HaveOccurred())
		return cri.FeaturesFromStatus(st).Handlers[""].RecursiveReadOnlyMounts
	}
	// hostDir is a host directory with a tmpfs mounted at sub/.
	hostDir := func() string {
		GinkgoHelper()
		dir := GinkgoT().TempDir()
		sub := filepath.Join(dir, "sub")
		Expect(os.Mkdir(sub, 0o755)).To(Succeed())
		Expect(syscall.Mount("tmpfs", sub, "tmpfs", 0, "size=1m")).To(Succeed())
		DeferCleanup(func() { _ = syscall.Unmount(sub, syscall.MNT_DETACH) })
		return dir
	}
	podWith := func(ns, name, dir string, mode *corev1.RecursiveReadOnlyMode) *corev1.Pod {
		p := utils.BusyboxPod(ns, name, rroNode, "sleep", "3600")
		p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "host", MountPath: "/plain", ReadOnly: true},
			{Name: "host", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: mode},
		}
		return p
	}
	// touch reports what touching path in the pod's container says: "" when
	// it worked.
	touch := func(ctx SpecContext, p *corev1.Pod, path string) string {
		GinkgoHelper()
		rs, _ := newCRIClients(ctx)
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		stdout, stderr, err := rs.ExecSync(ctx, id, []string{"sh", "-c", "touch " + path + " 2>&1 || true"}, criTimeout)
		Expect(err).NotTo(HaveOccurred(), "%s", stderr)
		return strings.TrimSpace(string(stdout))
	}

	It("makes an IfPossible mount read-only below its top where the runtime can, and plain read-only where it cannot", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, podWith(ns, "ifpossible", hostDir(), ptr.To(corev1.RecursiveReadOnlyIfPossible)))).To(Succeed())
		p := utils.WaitForPod(ctx, env.Admin, ns, "ifpossible", rroTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		want := corev1.RecursiveReadOnlyDisabled
		if supported(ctx) {
			want = corev1.RecursiveReadOnlyEnabled
		}
		Expect(p.Status.ContainerStatuses[0].VolumeMounts).To(Equal([]corev1.VolumeMountStatus{
			{Name: "host", MountPath: "/plain", ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyDisabled)},
			{Name: "host", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: ptr.To(want)},
		}), "the kubelet's volume mount status")
		Expect(touch(ctx, p, "/plain/top")).To(ContainSubstring("Read-only file system"), "the top of a read-only mount")
		Expect(touch(ctx, p, "/plain/sub/a")).To(BeEmpty(), "a plain read-only mount leaves the filesystem below it writable")
		Expect(touch(ctx, p, "/rro/top")).To(ContainSubstring("Read-only file system"))
		if supported(ctx) {
			By("the runtime's default handler supports recursive read-only mounts")
			Expect(touch(ctx, p, "/rro/sub/b")).To(ContainSubstring("Read-only file system"), "recursively read-only")
		} else {
			Expect(touch(ctx, p, "/rro/sub/b")).To(BeEmpty(), "no recursive read-only mounts on this runtime: plain read-only")
		}
	})

	It("runs an Enabled mount only where the runtime supports it, and says why elsewhere", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, podWith(ns, "enabled", hostDir(), ptr.To(corev1.RecursiveReadOnlyEnabled)))).To(Succeed())
		if !supported(ctx) {
			By("the runtime's default handler does not support recursive read-only mounts")
			utils.WaitForPod(ctx, env.Admin, ns, "enabled", rroTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				w := p.Status.ContainerStatuses[0].State.Waiting
				g.Expect(w).NotTo(BeNil())
				g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
				g.Expect(w.Message).To(Equal(`volume "host" requested recursive read-only mode, but it is not supported by the runtime`))
			})
			Expect(env.Nodelet.Running()).To(BeTrue())
			return
		}
		p := utils.WaitForPod(ctx, env.Admin, ns, "enabled", rroTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Expect(touch(ctx, p, "/plain/sub/a")).To(BeEmpty())
		Expect(touch(ctx, p, "/rro/sub/b")).To(ContainSubstring("Read-only file system"))
	})
})
