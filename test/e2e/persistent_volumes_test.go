package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// pvNode is the node the persistent volume specs' nodelet runs.
	pvNode = "e2e-pv"
	// pvTimeout covers a binding by the PV controller (its claim resync is
	// 15s), nodelet's retry of the pod's volumes (back-off up to 30s), a
	// sandbox and a container.
	pvTimeout = 90 * time.Second
	// pvRefusedFor is how long a pod waiting for its volume is watched not
	// starting.
	pvRefusedFor = 5 * time.Second
)

var _ = Describe("Persistent volumes", Ordered, func() {
	var api *utils.APIServer
	BeforeAll(func(ctx SpecContext) {
		// An API server of their own: the controller-manager's binder,
		// ephemeral volume controller and garbage collector stay away
		// from the other specs' objects.
		api = utils.MustStartAPIServer(ctx)
		utils.MustStartControllerManager(ctx, api, utils.ControllerManagerOptions{})
	})
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: pvNode, API: api, Containerd: ctrd}
	})

	// hostDir returns a new directory of the host for a PV.
	hostDir := func() string {
		GinkgoHelper()
		dir, err := os.MkdirTemp("", "nodelet-pv-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		return dir
	}
	createPV := func(ctx SpecContext, name, class string, src corev1.PersistentVolumeSource, affinityHost string, mode ...corev1.PersistentVolumeMode) {
		GinkgoHelper()
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              class,
				PersistentVolumeSource:        src,
			},
		}
		if len(mode) > 0 {
			pv.Spec.VolumeMode = &mode[0]
		}
		if affinityHost != "" {
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{affinityHost}}},
			}}}}
		}
		Expect(env.Admin.Create(ctx, pv)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, pv))).To(Succeed())
		})
	}
	claimSpec := func(class string) corev1.PersistentVolumeClaimSpec {
		return corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}
	}
	createClaim := func(ctx SpecContext, ns, name, class string) {
		GinkgoHelper()
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: claimSpec(class)}
		Expect(env.Admin.Create(ctx, claim)).To(Succeed())
	}
	waitBound := func(ctx SpecContext, ns, name string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			claim := &corev1.PersistentVolumeClaim{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim)).To(Succeed())
			g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
		}).WithContext(ctx).WithTimeout(pvTimeout).WithPolling(pollInterval).Should(Succeed())
	}
	// claimPod is a pod that runs script in a shell with the claim mounted
	// at /data, once.
	claimPod := func(ns, name, claim, script string) *corev1.Pod {
		pod := utils.BusyboxPod(ns, name, pvNode, "sh", "-c", script)
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		return pod
	}
	expectSucceeded := func(ctx SpecContext, ns, name string) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, pvTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodFailed), "pod %s failed: %v", name, p.Status.ContainerStatuses)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
		})
	}
	deletePod := func(ctx SpecContext, ns, name string) {
		GinkgoHelper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		Expect(client.IgnoreNotFound(env.Admin.Delete(ctx, pod))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(pod), pod))
		}).WithContext(ctx).WithTimeout(pvTimeout).WithPolling(pollInterval).Should(BeTrue())
	}
	// expectWaitingOnVolume waits for a FailedMount Event of the pod saying
	// msg, then checks that no sandbox is made for it. (The pod's first
	// sync may come before the Node authorizer lets the node read the
	// claim, and its Event says so: another FailedMount, before this one.)
	expectWaitingOnVolume := func(ctx SpecContext, ns, name, msg string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var messages []string
			for _, e := range events.Items {
				if e.InvolvedObject.Name == name && e.Reason == "FailedMount" && e.Type == corev1.EventTypeWarning {
					messages = append(messages, e.Message)
				}
			}
			g.Expect(messages).To(ContainElement(msg))
		}).WithContext(ctx).WithTimeout(pvTimeout).WithPolling(pollInterval).Should(Succeed())
		rs, _ := newCRIClients(ctx)
		Consistently(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, name)(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sandboxes).To(BeEmpty(), "no sandbox for a pod waiting on its volume")
		}).WithContext(ctx).WithTimeout(pvRefusedFor).WithPolling(pollInterval).Should(Succeed())
	}

	It("keeps a hostPath PV's data from one pod to the next on the same claim", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		class := "hostpath-" + ns
		dir := hostDir()
		createPV(ctx, "pv-hostpath-"+ns, class, corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}, "")
		createClaim(ctx, ns, "data", class)
		waitBound(ctx, ns, "data")

		Expect(env.Admin.Create(ctx, claimPod(ns, "writer", "data", "echo kept > /data/file"))).To(Succeed())
		expectSucceeded(ctx, ns, "writer")
		deletePod(ctx, ns, "writer")
		Expect(os.ReadFile(filepath.Join(dir, "file"))).To(Equal([]byte("kept\n")), "the PV's directory holds the file")

		Expect(env.Admin.Create(ctx, claimPod(ns, "reader", "data", `test "$(cat /data/file)" = kept`))).To(Succeed())
		expectSucceeded(ctx, ns, "reader")
	})

	It("bind-mounts a local PV of this node and hands it to the pod's fsGroup", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		class := "local-" + ns
		dir := hostDir()
		createPV(ctx, "pv-local-"+ns, class, corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}, pvNode)
		createClaim(ctx, ns, "data", class)
		waitBound(ctx, ns, "data")

		pod := claimPod(ns, "grouped", "data",
			`test "$(stat -c %g /data)" = 4321 && touch /data/made && test "$(stat -c %g /data/made)" = 4321`)
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](4321)}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		expectSucceeded(ctx, ns, "grouped")
		info, err := os.Stat(filepath.Join(dir, "made"))
		Expect(err).NotTo(HaveOccurred(), "the file was made in the local directory")
		Expect(info.Mode().IsRegular()).To(BeTrue())
		deletePod(ctx, ns, "grouped")
		Expect(filepath.Join(dir, "made")).To(BeAnExistingFile(), "the pod's teardown unmounted the volume and left its data")
	})

	It("keeps a pod whose claim is not bound waiting, and starts it once a PV binds", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		class := "later-" + ns
		createClaim(ctx, ns, "data", class)
		Expect(env.Admin.Create(ctx, claimPod(ns, "waiting", "data", "echo started > /data/file"))).To(Succeed())
		expectWaitingOnVolume(ctx, ns, "waiting", fmt.Sprintf(
			"Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC %s/data: PVC is not bound", ns))

		By("creating a PV the binder gives the claim")
		dir := hostDir()
		createPV(ctx, "pv-later-"+ns, class, corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}, "")
		expectSucceeded(ctx, ns, "waiting")
		Expect(os.ReadFile(filepath.Join(dir, "file"))).To(Equal([]byte("started\n")))
	})

	It("runs a pod on a generic ephemeral volume, whose claim goes with the pod", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		class := "manual-" + ns
		dir := hostDir()
		createPV(ctx, "pv-ephemeral-"+ns, class, corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}, "")
		pod := utils.BusyboxPod(ns, "scratch", pvNode, "sh", "-c", "echo ephemeral > /data/file && sleep 3600")
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claimSpec(class)}}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "scratch", pvTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Eventually(func() ([]byte, error) {
			return os.ReadFile(filepath.Join(dir, "file"))
		}).WithContext(ctx).WithTimeout(containerTimeout).WithPolling(pollInterval).Should(Equal([]byte("ephemeral\n")))
		claim := &corev1.PersistentVolumeClaim{}
		Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scratch-data"}, claim)).To(Succeed())
		Expect(metav1.GetControllerOf(claim)).To(HaveField("Name", "scratch"), "the claim is controlled by its pod")

		By("deleting the pod, which lets the garbage collector delete its claim")
		deletePod(ctx, ns, "scratch")
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scratch-data"}, claim))
		}).WithContext(ctx).WithTimeout(pvTimeout).WithPolling(pollInterval).Should(BeTrue())
	})

	It("gives a container a local block PV through its volumeDevices", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		class := "block-" + ns
		backing := filepath.Join(hostDir(), "disk")
		Expect(os.WriteFile(backing, make([]byte, 1<<20), 0o600)).To(Succeed())
		out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", backing).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "losetup: %s", out)
		loop := strings.TrimSpace(string(out))
		DeferCleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })

		createPV(ctx, "pv-block-"+ns, class, corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: loop}}, pvNode, corev1.PersistentVolumeBlock)
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}, Spec: claimSpec(class)}
		claim.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
		Expect(env.Admin.Create(ctx, claim)).To(Succeed())
		waitBound(ctx, ns, "data")

		pod := utils.BusyboxPod(ns, "raw", pvNode, "sh", "-c",
			"echo written-raw | dd of=/dev/xvda bs=512 count=1 conv=sync && dd if=/dev/xvda bs=11 count=1 | grep -q written-raw")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		expectSucceeded(ctx, ns, "raw")
		data, err := os.ReadFile(backing)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data[:11])).To(Equal("written-raw"), "the container wrote to the device")
	})

	It("does not start a pod on a local PV of another node", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		class := "elsewhere-" + ns
		createPV(ctx, "pv-elsewhere-"+ns, class, corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: hostDir()}}, "another-node")
		createClaim(ctx, ns, "data", class)
		waitBound(ctx, ns, "data")
		Expect(env.Admin.Create(ctx, claimPod(ns, "misplaced", "data", "true"))).To(Succeed())
		expectWaitingOnVolume(ctx, ns, "misplaced", `MountVolume.NodeAffinity check failed for volume "data" : no matching NodeSelectorTerms`)
	})
})
