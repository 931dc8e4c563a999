package e2e

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// volumeStatsNode is the node of the volume stats specs.
	volumeStatsNode = "e2e-volumestats"
	// volumeStatsPeriod is the node's volumeStatsAggPeriod: short, so a
	// write shows in the summary within a few seconds.
	volumeStatsPeriod = "2s"
	// volumeStatsTimeout covers the pod's start, its writes and a few
	// measuring periods.
	volumeStatsTimeout = 90 * time.Second
)

var _ = Describe("Volume stats", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: volumeStatsNode, API: apiServer, Containerd: ctrd,
			Config: map[string]any{"volumeStatsAggPeriod": volumeStatsPeriod}}
	})

	// summary reads the node's /stats/summary through the API server's node
	// proxy, as kubectl get --raw /api/v1/nodes/<node>/proxy/stats/summary
	// does.
	summary := func(ctx SpecContext, g Gomega) *statsapi.Summary {
		cs, err := kubernetes.NewForConfig(apiServer.Config)
		g.Expect(err).NotTo(HaveOccurred())
		raw, err := cs.CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes", volumeStatsNode, "proxy", "stats", "summary").DoRaw(ctx)
		g.Expect(err).NotTo(HaveOccurred(), string(raw))
		sum := &statsapi.Summary{}
		g.Expect(json.Unmarshal(raw, sum)).To(Succeed())
		return sum
	}

	It("lists a pod's emptyDir, configMap and memory-backed volumes with what they use", func(ctx SpecContext) {
		const mib = 1 << 20
		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"},
			Data: map[string]string{"greeting": "hello"}}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		pod := utils.BusyboxPod(ns, "writer", volumeStatsNode, "sh", "-c",
			"dd if=/dev/zero of=/data/blob bs=1M count=5 && dd if=/dev/zero of=/mem/blob bs=1M count=1 && sync && sleep 3600")
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "data", MountPath: "/data"}, {Name: "mem", MountPath: "/mem"}, {Name: "settings", MountPath: "/settings"},
		}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())

		Eventually(func(g Gomega) {
			var stats *statsapi.PodStats
			for _, p := range summary(ctx, g).Pods {
				if p.PodRef.Namespace == ns && p.PodRef.Name == "writer" {
					stats = &p
				}
			}
			g.Expect(stats).NotTo(BeNil(), "the pod is in the summary")
			volumes := map[string]statsapi.VolumeStats{}
			for _, v := range stats.VolumeStats {
				volumes[v.Name] = v
			}
			g.Expect(volumes).To(HaveKey("data"))
			g.Expect(volumes).To(HaveKey("mem"))
			g.Expect(volumes).To(HaveKey("settings"))
			for name, v := range volumes {
				g.Expect(v.PVCRef).To(BeNil(), name)
				g.Expect(v.CapacityBytes).NotTo(BeNil(), name)
				g.Expect(*v.CapacityBytes).To(BeNumerically(">", 0), name)
				g.Expect(v.UsedBytes).NotTo(BeNil(), name)
				g.Expect(v.InodesUsed).NotTo(BeNil(), name)
			}
			data, mem, settings := volumes["data"], volumes["mem"], volumes["settings"]
			g.Expect(*data.UsedBytes).To(BeNumerically(">=", 5*mib), "the 5 MiB written to the emptyDir")
			g.Expect(*data.UsedBytes).To(BeNumerically("<", 6*mib), "only what the emptyDir holds")
			g.Expect(*data.InodesUsed).To(BeNumerically(">=", 2), "the directory and the file")
			g.Expect(*mem.UsedBytes).To(BeNumerically(">=", 1*mib), "the 1 MiB written to the tmpfs")
			g.Expect(*mem.UsedBytes).To(BeNumerically("<", 2*mib))
			g.Expect(*settings.UsedBytes).To(BeNumerically(">", 0), "the configMap's files")
			g.Expect(*settings.UsedBytes).To(BeNumerically("<", 1*mib))
			g.Expect(stats.EphemeralStorage).NotTo(BeNil())
			g.Expect(*stats.EphemeralStorage.UsedBytes).To(BeNumerically(">=", *data.UsedBytes+*settings.UsedBytes),
				"the emptyDir on disk and the configMap count towards the pod's ephemeral storage")
		}).WithContext(ctx).WithTimeout(volumeStatsTimeout).WithPolling(time.Second).Should(Succeed())

		By("serving no claim metrics for volumes without a claim")
		metrics, err := env.Nodelet.Metrics(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(metrics).NotTo(ContainSubstring("kubelet_volume_stats_used_bytes{"))
	}, SpecTimeout(volumeStatsTimeout+apiTimeout))
})
