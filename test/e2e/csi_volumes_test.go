package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/csi/hostpath"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// csiVolumesClass is the StorageClass of the CSI volumes specs.
	csiVolumesClass = "e2e-csi-volumes"
	// csiVolumeTimeout covers a pod's start with a provisioned, attached
	// volume: provisioning, binding, scheduling, attaching, staging and
	// publishing, each a controller round trip or two.
	csiVolumeTimeout = 2 * time.Minute
)

// Pods with CSI volumes on nodelet, with everything around them real: the
// test CSI driver and its registrar as host processes beside nodelet (the
// registrar in nodelet's plugins_registry), external-provisioner and
// external-attacher, kube-controller-manager (the PV binder, the
// attach/detach, ephemeral volume, StatefulSet and garbage collector
// controllers) and kube-scheduler.
var _ = Describe("CSI volumes", Ordered, func() {
	var (
		admin   client.Client
		cs      *kubernetes.Clientset
		nodelet *utils.Nodelet
		stack   *utils.CSIStack
		node    string
		ns      string
	)

	BeforeAll(func(ctx SpecContext) {
		var err error
		admin, err = apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		cs, err = kubernetes.NewForConfig(apiServer.Config)
		Expect(err).NotTo(HaveOccurred())
		utils.MustStartControllerManager(ctx, apiServer, utils.ControllerManagerOptions{})
		utils.MustStartScheduler(ctx, apiServer)

		node = "e2e-csi-volumes"
		nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd,
			Config: map[string]any{"volumeStatsAggPeriod": "2s"}})
		if nodelet != nil {
			DeferCleanup(nodelet.Cleanup)
		}
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(deleteNode(ctx, admin, node)).To(Succeed()) })
		waitNodeReady(ctx, admin, node, "nodelet", nodelet.LogTail)

		stack = utils.MustStartCSIStack(ctx, apiServer, utils.CSIStackOptions{
			NodeID:          node,
			RegistrationDir: filepath.Join(nodelet.RootDir, "plugins_registry"),
			PluginDir:       filepath.Join(nodelet.RootDir, "plugins", hostpath.DefaultDriverName),
			StorageClass:    csiVolumesClass,
			AttachRequired:  true,
		})
		ns = utils.NewNamespace(ctx, admin)
	}, NodeTimeout(suiteSetupTimeout))

	// handleOf is the volume handle of the claim's PV, once bound.
	handleOf := func(ctx context.Context, g Gomega, claim string) string {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc)).To(Succeed())
		g.Expect(pvc.Spec.VolumeName).NotTo(BeEmpty(), "claim %s is bound", claim)
		pv := &corev1.PersistentVolume{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)).To(Succeed())
		g.Expect(pv.Spec.CSI).NotTo(BeNil())
		return pv.Spec.CSI.VolumeHandle
	}
	// calls counts the successful driver calls of method for the volume.
	calls := func(method, handle string) int {
		n := 0
		for _, c := range stack.Calls(method) {
			if c.VolumeID == handle && c.Code == "OK" {
				n++
			}
		}
		return n
	}
	// mountsOf lists nodelet's mounts of the volume: its staging (named
	// after the handle's hash, so matched by the driver's directory) and
	// its publish paths (matched by the PV's name).
	mountsOf := func(pvName string) []string {
		var out []string
		for _, m := range mountsUnder(nodelet.RootDir) {
			if strings.Contains(m, "/"+pvName+"/") || strings.HasSuffix(m, "/"+pvName) {
				out = append(out, m)
			}
		}
		return out
	}
	stagingMounts := func() []string {
		return mountsUnder(filepath.Join(nodelet.RootDir, "plugins", "kubernetes.io", "csi", hostpath.DefaultDriverName))
	}
	podLog := func(ctx context.Context, name string) string {
		out, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
		if err != nil {
			return err.Error()
		}
		return string(out)
	}

	It("registers the driver: the node's CSINode, its node id annotation and topology label", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			cn := &storagev1.CSINode{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: node}, cn)).To(Succeed())
			g.Expect(cn.Spec.Drivers).To(ConsistOf(And(
				HaveField("Name", hostpath.DefaultDriverName),
				HaveField("NodeID", node),
				HaveField("TopologyKeys", ConsistOf(hostpath.TopologyKey)),
			)))
			n := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			g.Expect(n.Labels).To(HaveKeyWithValue(hostpath.TopologyKey, node))
			g.Expect(n.Annotations).To(HaveKeyWithValue("csi.volume.kubernetes.io/nodeid", fmt.Sprintf(`{%q:%q}`, hostpath.DefaultDriverName, node)))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(40) })
	})

	It("keeps a StatefulSet's data across its pod's replacement, and scaling to zero unpublishes and unstages it", func(ctx SpecContext) {
		labels := map[string]string{"app": "db"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector:                  map[string]string{corev1.LabelHostname: node},
						AutomountServiceAccountToken:  ptr.To(false),
						TerminationGracePeriodSeconds: ptr.To[int64](1),
						Containers: []corev1.Container{{
							Name: "main", Image: utils.BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
							Env: []corev1.EnvVar{{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{
								FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}},
							Command: []string{"sh", "-c", `if [ -f /data/owner ]; then echo "found $(cat /data/owner)"; fi; ` +
								`echo "$POD_UID" > /data/owner && sync && echo written; exec sleep 3600`},
							VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
						}},
					},
				},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						StorageClassName: ptr.To(csiVolumesClass),
						Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
					},
				}},
			},
		}
		Expect(admin.Create(ctx, sts)).To(Succeed())

		By("running the first pod, which writes its UID")
		var first corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, &first)).To(Succeed())
			g.Expect(first.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(podLog(ctx, "db-0")).To(ContainSubstring("written"))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) + "\n" + stack.LogTail(40) })
		Expect(podLog(ctx, "db-0")).NotTo(ContainSubstring("found"), "the volume starts empty")
		var handle, pvName string
		Eventually(func(g Gomega) { handle = handleOf(ctx, g, "data-db-0") }).WithContext(ctx).Should(Succeed())
		pvc := &corev1.PersistentVolumeClaim{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, pvc)).To(Succeed())
		pvName = pvc.Spec.VolumeName
		Expect(calls("NodeStageVolume", handle)).To(Equal(1))
		Expect(calls("NodePublishVolume", handle)).To(Equal(1))
		Expect(mountsOf(pvName)).NotTo(BeEmpty())

		By("listing the attached volume in use in the node's status")
		unique := corev1.UniqueVolumeName("kubernetes.io/csi/" + hostpath.DefaultDriverName + "^" + handle)
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			g.Expect(n.Status.VolumesInUse).To(ContainElement(unique))
			g.Expect(n.Status.VolumesAttached).To(ContainElement(HaveField("Name", unique)))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed())

		By("serving the volume's usage in /stats/summary and kubelet_volume_stats_used_bytes")
		Eventually(func(g Gomega) {
			raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(raw)).To(ContainSubstring(`"pvcRef":{"name":"data-db-0","namespace":"` + ns + `"}`))
			metrics, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(metricValue(string(metrics), `kubelet_volume_stats_used_bytes{namespace="`+ns+`",persistentvolumeclaim="data-db-0"}`)).To(BeNumerically(">", 0))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed())

		By("deleting the pod: its replacement reads the data back")
		Expect(admin.Delete(ctx, &first)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, &p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(first.UID))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(podLog(ctx, "db-0")).To(ContainSubstring("found " + string(first.UID)))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })

		By("scaling to zero: nothing of the volume stays mounted")
		// A patch: the StatefulSet controller writes the object meanwhile.
		unscaled := client.MergeFrom(sts.DeepCopy())
		sts.Spec.Replicas = ptr.To[int32](0)
		Expect(admin.Patch(ctx, sts, unscaled)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(client.IgnoreNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, &corev1.Pod{}))).To(Succeed())
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, &corev1.Pod{})).NotTo(Succeed())
			g.Expect(mountsOf(pvName)).To(BeEmpty())
			g.Expect(stagingMounts()).To(BeEmpty())
			// Each pod's end unstaged it: no other pod on the node used it.
			g.Expect(calls("NodeUnstageVolume", handle)).To(Equal(2))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })
		Expect(calls("NodeStageVolume", handle)).To(Equal(2), "staged once per pod")
		Expect(calls("NodePublishVolume", handle)).To(Equal(2), "published once per pod")
		Expect(calls("NodeUnpublishVolume", handle)).To(Equal(2), "unpublished once per pod")

		By("leaving the volume out of the node's status, so the attach/detach controller detaches it")
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			g.Expect(n.Status.VolumesInUse).NotTo(ContainElement(unique))
			g.Expect(n.Status.VolumesAttached).NotTo(ContainElement(HaveField("Name", unique)))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed())
	})

	It("gives a CSI inline volume and a generic ephemeral volume the life of their pod", func(ctx SpecContext) {
		pod := utils.BusyboxPod(ns, "ephemeral", node, "sh", "-c", "echo hi > /inline/f && echo hi > /generic/f && echo ready; exec sleep 3600")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "inline", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: hostpath.DefaultDriverName}}},
			{Name: "generic", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(csiVolumesClass),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}},
				}},
			}}},
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "inline", MountPath: "/inline"}, {Name: "generic", MountPath: "/generic"}}
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(podLog(ctx, "ephemeral")).To(ContainSubstring("ready"))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })

		var inlineHandle string
		for _, c := range stack.Calls("NodePublishVolume") {
			if c.VolumeContext[hostpath.EphemeralContextKey] == "true" && c.VolumeContext["csi.storage.k8s.io/pod.name"] == "ephemeral" {
				inlineHandle = c.VolumeID
			}
		}
		Expect(inlineHandle).NotTo(BeEmpty(), "the inline volume was published as ephemeral, with the pod's identity")
		claim := "ephemeral-generic"
		var genericHandle string
		Eventually(func(g Gomega) { genericHandle = handleOf(ctx, g, claim) }).WithContext(ctx).Should(Succeed())
		pvc := &corev1.PersistentVolumeClaim{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc)).To(Succeed())
		Expect(metav1.IsControlledBy(pvc, pod) || pvc.OwnerReferences[0].Name == "ephemeral").To(BeTrue(), "the claim is the pod's")
		pvName := pvc.Spec.VolumeName

		By("deleting the pod: both volumes go with it")
		Expect(deletePodAndWait(ctx, admin, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(calls("NodeUnpublishVolume", inlineHandle)).To(Equal(1))
			g.Expect(calls("NodeUnpublishVolume", genericHandle)).To(Equal(1))
			g.Expect(calls("NodeUnstageVolume", genericHandle)).To(Equal(1))
			// The garbage collector deletes the claim the pod owned, and
			// the PV with it (reclaim policy Delete).
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &corev1.PersistentVolumeClaim{})).NotTo(Succeed())
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: pvName}, &corev1.PersistentVolume{})).NotTo(Succeed())
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })
		Expect(mountsUnder(filepath.Join(nodelet.RootDir, "pods"))).To(BeEmpty())
	})

	It("gives pods a CSI raw block volume: one writes the device, a second reads it back, and both go clean", func(ctx SpecContext) {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "raw"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(csiVolumesClass),
				VolumeMode:       ptr.To(corev1.PersistentVolumeBlock),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Mi")}},
			},
		}
		Expect(admin.Create(ctx, claim)).To(Succeed())
		var handle string
		Eventually(func(g Gomega) { handle = handleOf(ctx, g, "raw") }).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed())
		blockPod := func(name, script string) *corev1.Pod {
			pod := utils.BusyboxPod(ns, name, node, "sh", "-c", script)
			pod.Spec.RestartPolicy = corev1.RestartPolicyNever
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "raw"}}}}
			pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
			return pod
		}
		succeeded := func(name string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				p := &corev1.Pod{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s: %s", name, podLog(ctx, name))
			}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })
		}

		writer := blockPod("raw-writer", "test -b /dev/xvda && echo written-csi-raw | dd of=/dev/xvda bs=512 count=1 conv=sync,fsync")
		Expect(admin.Create(ctx, writer)).To(Succeed())
		succeeded("raw-writer")
		var publish *hostpath.CallRecord
		for _, c := range stack.Calls("NodePublishVolume") {
			if c.VolumeID == handle && c.Code == "OK" {
				publish = &c
			}
		}
		Expect(publish).NotTo(BeNil())
		Expect(publish.TargetPath).To(HavePrefix(filepath.Join(nodelet.RootDir, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish")+"/"),
			"the kubelet's block publish path")
		Expect(deletePodAndWait(ctx, admin, writer)).To(Succeed())

		reader := blockPod("raw-reader", "dd if=/dev/xvda bs=15 count=1 2>/dev/null; echo")
		Expect(admin.Create(ctx, reader)).To(Succeed())
		succeeded("raw-reader")
		Expect(podLog(ctx, "raw-reader")).To(ContainSubstring("written-csi-raw"))
		Expect(deletePodAndWait(ctx, admin, reader)).To(Succeed())

		By("both pods gone: unpublished twice, unstaged, nothing left on the node")
		Eventually(func(g Gomega) {
			g.Expect(calls("NodeUnpublishVolume", handle)).To(Equal(2))
			g.Expect(calls("NodeUnstageVolume", handle)).To(BeNumerically(">=", 1))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })
		Expect(mountsUnder(nodelet.RootDir)).To(BeEmpty())
		Expect(admin.Delete(ctx, claim)).To(Succeed())
	})

	It("asks the driver's NodeGetInfo again every nodeAllocatableUpdatePeriodSeconds", func(ctx SpecContext) {
		setPeriod := func(ctx context.Context, seconds *int64) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				d := &storagev1.CSIDriver{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Name: hostpath.DefaultDriverName}, d)).To(Succeed())
				d.Spec.NodeAllocatableUpdatePeriodSeconds = seconds
				g.Expect(admin.Update(ctx, d)).To(Succeed())
			}).WithContext(ctx).Should(Succeed())
		}
		infoCalls := func() int { return len(stack.Calls("NodeGetInfo")) }
		// Registered, and no period: asked once, at registration.
		Eventually(infoCalls).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(BeNumerically(">=", 1))
		Consistently(infoCalls).WithContext(ctx).WithTimeout(3 * time.Second).Should(Equal(infoCalls()))
		before := infoCalls()
		setPeriod(ctx, ptr.To[int64](10))
		DeferCleanup(func(ctx SpecContext) { setPeriod(ctx, nil) })
		Eventually(infoCalls).WithContext(ctx).WithTimeout(25*time.Second).Should(BeNumerically(">=", before+2),
			func() string { return nodelet.LogTail(30) })
	})

	It("passes service account tokens in the publish secrets when the CSIDriver says serviceAccountTokenInSecrets", func(ctx SpecContext) {
		const audience = "e2e-csi-tokens"
		setTokens := func(ctx context.Context, requests []storagev1.TokenRequest, inSecrets *bool) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				d := &storagev1.CSIDriver{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Name: hostpath.DefaultDriverName}, d)).To(Succeed())
				d.Spec.TokenRequests = requests
				d.Spec.ServiceAccountTokenInSecrets = inSecrets
				g.Expect(admin.Update(ctx, d)).To(Succeed())
			}).WithContext(ctx).Should(Succeed())
		}
		setTokens(ctx, []storagev1.TokenRequest{{Audience: audience}}, ptr.To(true))
		DeferCleanup(func(ctx SpecContext) { setTokens(ctx, nil, nil) })

		pod := utils.BusyboxPod(ns, "tokens", node, "sh", "-c", "echo ready; exec sleep 3600")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		// The Node authorizer lets the node ask tokens for the service
		// account its pod names.
		pod.Spec.ServiceAccountName = "default"
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})).To(Succeed())
		}).WithContext(ctx).Should(Succeed())
		pod.Spec.Volumes = []corev1.Volume{{Name: "inline", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: hostpath.DefaultDriverName}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "inline", MountPath: "/inline"}}
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(podLog(ctx, "tokens")).To(ContainSubstring("ready"))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })

		var publish *hostpath.CallRecord
		for _, c := range stack.Calls("NodePublishVolume") {
			if c.VolumeContext["csi.storage.k8s.io/pod.name"] == "tokens" && c.Code == "OK" {
				publish = &c
			}
		}
		Expect(publish).NotTo(BeNil(), "the pod's volume was published")
		Expect(publish.SecretKeys).To(ContainElement("csi.storage.k8s.io/serviceAccount.tokens"))
		Expect(publish.VolumeContext).NotTo(HaveKey("csi.storage.k8s.io/serviceAccount.tokens"))
		Expect(deletePodAndWait(ctx, admin, pod)).To(Succeed())
	})

	It("finishes a teardown that SIGKILL cut short, once, and keeps a running pod's volume mounted", func(ctx SpecContext) {
		claimPod := func(name string) *corev1.Pod {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(csiVolumesClass),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}},
				},
			}
			Expect(admin.Create(ctx, pvc)).To(Succeed())
			// sleep as PID 1 ignores SIGTERM: the pod takes its whole
			// grace period to stop, the window for the kill.
			p := utils.BusyboxPod(ns, name, node, "sleep", "3600")
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			Expect(admin.Create(ctx, p)).To(Succeed())
			return p
		}
		leaving, staying := claimPod("leaving"), claimPod("staying")
		for _, name := range []string{"leaving", "staying"} {
			utils.WaitForPod(ctx, admin, ns, name, csiVolumeTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			})
		}
		var leavingHandle, stayingHandle string
		Eventually(func(g Gomega) {
			leavingHandle, stayingHandle = handleOf(ctx, g, "leaving"), handleOf(ctx, g, "staying")
		}).WithContext(ctx).Should(Succeed())
		stayingPV := &corev1.PersistentVolumeClaim{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "staying"}, stayingPV)).To(Succeed())
		stayingMounts := mountsOf(stayingPV.Spec.VolumeName)
		Expect(stayingMounts).NotTo(BeEmpty())

		By("killing nodelet while the pod is being deleted")
		Expect(admin.Delete(ctx, leaving)).To(Succeed())
		time.Sleep(time.Second)
		Expect(nodelet.Kill()).To(Succeed())
		Expect(nodelet.Restart(ctx)).To(Succeed())

		Expect(deletePodAndWait(ctx, admin, leaving)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(calls("NodeUnpublishVolume", leavingHandle)).To(Equal(1))
			g.Expect(calls("NodeUnstageVolume", leavingHandle)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(csiVolumeTimeout).Should(Succeed(), func() string { return nodelet.LogTail(60) })
		Consistently(func(g Gomega) {
			g.Expect(calls("NodeUnpublishVolume", leavingHandle)).To(Equal(1), "unpublished exactly once")
			g.Expect(calls("NodeUnstageVolume", leavingHandle)).To(Equal(1), "unstaged exactly once")
			g.Expect(calls("NodeUnpublishVolume", stayingHandle)).To(BeZero(), "the running pod's volume is left alone")
			g.Expect(mountsOf(stayingPV.Spec.VolumeName)).To(Equal(stayingMounts))
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
		utils.WaitForPod(ctx, admin, ns, "staying", csiVolumeTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(ConsistOf(HaveField("RestartCount", BeZero())))
		})
		Expect(deletePodAndWait(ctx, admin, staying)).To(Succeed())
	})
})
