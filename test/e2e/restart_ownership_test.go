package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/utils"
)

// ownershipNode is the node of the fsGroup-after-restart spec.
const ownershipNode = "e2e-ownership"

var _ = Describe("Volume ownership across a restart", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: ownershipNode, API: apiServer, Containerd: ctrd}
	})

	It("does not hand an adopted pod's emptyDir to its fsGroup again, so a file a container made private stays private", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker", Namespace: ns}, Data: map[string]string{"v": "1"}}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		pod := utils.BusyboxPod(ns, "private-file", ownershipNode, "sh", "-c",
			"echo secret > /data/private && chmod 600 /data/private && touch /data/made && sleep 3600")
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			configMapVolume("cfg", "marker"),
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "cfg", MountPath: "/cfg"}}
		createPod(ctx, env.Admin, pod)
		running := utils.WaitForPod(ctx, env.Admin, ns, pod.Name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		podDir := filepath.Join(env.Nodelet.RootDir, "pods", string(running.UID))
		data := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "data")
		Eventually(filepath.Join(data, "made")).WithTimeout(containerTimeout).WithPolling(pollInterval).Should(BeAnExistingFile())
		mode := func() fs.FileMode {
			info, err := os.Stat(filepath.Join(data, "private"))
			Expect(err).NotTo(HaveOccurred())
			return info.Mode().Perm()
		}
		Expect(mode()).To(Equal(fs.FileMode(0o600)))

		By("restarting nodelet, which adopts the running pod")
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())

		By("changing the ConfigMap, which reaches the volume once the adopted pod was synced")
		cm.Data = map[string]string{"v": "2"}
		Expect(env.Admin.Update(ctx, cm)).To(Succeed())
		Eventually(func() string {
			b, _ := os.ReadFile(filepath.Join(podDir, "volumes", "kubernetes.io~configmap", "cfg", "v"))
			return string(b)
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Equal("2"))
		Consistently(mode).WithTimeout(2*time.Second).WithPolling(pollInterval).Should(Equal(fs.FileMode(0o600)),
			"the restarted nodelet walked the emptyDir for the fsGroup again")
		Expect(filepath.Join(podDir, "plugins", "kubernetes.io~empty-dir", "data", "ready")).To(BeAnExistingFile())
	}, SpecTimeout(3*time.Minute))
})
