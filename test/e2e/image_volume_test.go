package e2e

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/utils"
)

// imageVolumeNode is the node the image volume specs' nodelet runs.
const imageVolumeNode = "e2e-image-volumes"

// Image volumes mount an image's files read-only into a container. The
// runtime mounts them: containerd 2 since 2.1 does, and nodelet must mount
// them there by the volume's pull policy and subPath; containerd 1.6 does
// not, and nodelet must refuse the container with a reason instead of
// starting it on an empty directory.
var _ = Describe("Image volumes", Ordered, Label(runtimeSmokeLabel), func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: imageVolumeNode, API: apiServer, Containerd: ctrd}
	})

	var artifact, registry string
	BeforeAll(func(ctx SpecContext) {
		reg := utils.MustStartRegistry(ctx, utils.RegistryOptions{})
		Expect(ctrd.AddInsecureRegistry(reg.Host())).To(Succeed())
		var err error
		artifact, err = reg.Push(ctx, utils.ArtifactImage)
		Expect(err).NotTo(HaveOccurred())
		registry = reg.Host()
	})

	// podMounting is a pod whose container prints what it finds under
	// the image volume "data" of image at /volume, and at /etc-only its
	// subPath etc, into its termination message, says whether it could
	// write to the volume, and exits.
	podMounting := func(ns, name, image, subPath string) *corev1.Pod {
		p := utils.BusyboxPod(ns, name, imageVolumeNode, "sh", "-c",
			"{ cat /volume/data.json /volume/etc/os-release /etc-only/os-release; "+
				"if touch /volume/written 2>/dev/null; then echo writable; else echo read-only; fi; } >/dev/termination-log 2>&1")
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: image, PullPolicy: corev1.PullAlways},
		}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
			{Name: "data", MountPath: "/volume"},
			{Name: "data", MountPath: "/etc-only", SubPath: subPath},
		}
		return p
	}

	waitingReason := func(ctx SpecContext, ns, name, reason string) string {
		GinkgoHelper()
		var message string
		utils.WaitForPod(ctx, env.Admin, ns, name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal(reason))
			message = w.Message
		})
		return message
	}

	It("mounts the image's files read-only, whole and by subPath, where the runtime can", func(ctx SpecContext) {
		if !utils.IsContainerd2() {
			Skip("containerd 1.6 mounts no image volume; the next spec covers it")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, podMounting(ns, "reader", artifact, "etc"))).To(Succeed())
		p := utils.WaitForPod(ctx, env.Admin, ns, "reader", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
		})
		t := p.Status.ContainerStatuses[0].State.Terminated
		Expect(t).NotTo(BeNil())
		Expect(t.Message).To(ContainSubstring("kitten.jpg"))
		Expect(t.Message).To(ContainSubstring("Alpine Linux"))
		Expect(strings.Count(t.Message, "ID=alpine")).To(Equal(2), "the whole volume's os-release and its subPath's: %s", t.Message)
		Expect(t.Message).To(HaveSuffix("read-only\n"))
	}, SpecTimeout(2*podStartTimeout))

	It("fails the container with CreateContainerError when the subPath is not in the image", func(ctx SpecContext) {
		if !utils.IsContainerd2() {
			Skip("containerd 1.6 mounts no image volume; the next spec covers it")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, podMounting(ns, "no-subpath", artifact, "no-such-dir"))).To(Succeed())
		Expect(waitingReason(ctx, ns, "no-subpath", "CreateContainerError")).To(ContainSubstring("no-such-dir"))
		Eventually(func(g Gomega) {
			g.Expect(podEvent(ctx, g, env.Admin, ns, "no-subpath", "Failed", corev1.EventTypeWarning)).To(HavePrefix("Error: "))
		}).WithTimeout(apiTimeout).Should(Succeed())
	}, SpecTimeout(2*podStartTimeout))

	It("backs off pulling an image volume's image that is not there, as a container's own image", func(ctx SpecContext) {
		if !utils.IsContainerd2() {
			Skip("containerd 1.6 mounts no image volume; the next spec covers it")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		missing := registry + "/no-such-artifact:1.0"
		Expect(env.Admin.Create(ctx, podMounting(ns, "no-image", missing, "etc"))).To(Succeed())
		Expect(waitingReason(ctx, ns, "no-image", "ImagePullBackOff")).To(HavePrefix(fmt.Sprintf("Back-off pulling image %q", missing)))
		Eventually(func(g Gomega) {
			g.Expect(podEvent(ctx, g, env.Admin, ns, "no-image", "Failed", corev1.EventTypeWarning)).To(ContainSubstring("no-such-artifact"))
			g.Expect(podEvent(ctx, g, env.Admin, ns, "no-image", "BackOff", corev1.EventTypeNormal)).To(Equal(fmt.Sprintf("Back-off pulling image %q", missing)))
		}).WithTimeout(apiTimeout).Should(Succeed())
	}, SpecTimeout(2*podStartTimeout))

	It("refuses the container with CreateContainerConfigError where the runtime cannot mount one", func(ctx SpecContext) {
		if utils.IsContainerd2() {
			Skip("containerd 2 mounts image volumes; the specs before cover it")
		}
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, podMounting(ns, "refused", artifact, "etc"))).To(Succeed())
		Expect(waitingReason(ctx, ns, "refused", "CreateContainerConfigError")).To(ContainSubstring("image volumes need a container runtime"))
		Eventually(func(g Gomega) {
			g.Expect(podEvent(ctx, g, env.Admin, ns, "refused", "Failed", corev1.EventTypeWarning)).To(ContainSubstring("image volumes need"))
		}).WithTimeout(apiTimeout).Should(Succeed())
	}, SpecTimeout(2*podStartTimeout))
})
