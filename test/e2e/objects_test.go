package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// objectsNode is the node the referenced-object specs' nodelet runs.
	objectsNode = "e2e-objects"
	// liveUpdateTimeout bounds a ConfigMap update reaching a running
	// container's volume.
	liveUpdateTimeout = 2 * time.Second
)

var _ = Describe("Referenced objects and the service environment", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: objectsNode, API: apiServer, Containerd: ctrd}
	})

	// hostDir is a directory of the test mounted into a container, to read
	// what the container sees.
	hostDir := func() string {
		GinkgoHelper()
		dir, err := os.MkdirTemp("", "nodelet-e2e-objects-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		return dir
	}
	withOut := func(pod *corev1.Pod, dir string) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "out", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: dir},
		}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "out", MountPath: "/out"})
	}
	readEnv := func(dir string) func(Gomega) map[string]string {
		return func(g Gomega) map[string]string {
			data, err := os.ReadFile(filepath.Join(dir, "env"))
			g.Expect(err).NotTo(HaveOccurred())
			vars := map[string]string{}
			for _, line := range strings.Split(string(data), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					vars[k] = v
				}
			}
			return vars
		}
	}

	It("gives every container the kubernetes Service's address and the Services of its namespace", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		master := &corev1.Service{}
		Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, master)).To(Succeed())
		web := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web-front", Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}
		Expect(env.Admin.Create(ctx, web)).To(Succeed())

		linked, unlinked := hostDir(), hostDir()
		for name, dir := range map[string]string{"linked": linked, "unlinked": unlinked} {
			pod := utils.BusyboxPod(ns, name, objectsNode, "sh", "-c", "env > /out/env; exec sleep 3600")
			withOut(pod, dir)
			if name == "unlinked" {
				pod.Spec.EnableServiceLinks = ptr.To(false)
			}
			Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		}
		vars := readEnv(linked)
		Eventually(vars).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(HaveKey("KUBERNETES_SERVICE_HOST"))
		got := vars(Default)
		Expect(got).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", master.Spec.ClusterIP))
		Expect(got).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT", fmt.Sprint(master.Spec.Ports[0].Port)))
		Expect(got).To(HaveKeyWithValue("WEB_FRONT_SERVICE_HOST", web.Spec.ClusterIP))
		Expect(got).To(HaveKeyWithValue("WEB_FRONT_SERVICE_PORT", "8080"))

		vars = readEnv(unlinked)
		Eventually(vars).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(HaveKey("KUBERNETES_SERVICE_HOST"))
		for k := range vars(Default) {
			Expect(k).NotTo(HavePrefix("WEB_FRONT_"), "enableServiceLinks: false sets only the KUBERNETES_ pair")
		}
	})

	It("brings a ConfigMap update into a running container's volume within 2 s, without restarting it", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
			Data:       map[string]string{"a": "v0", "b": "v0"},
		}
		Expect(env.Admin.Create(ctx, cm)).To(Succeed())
		out := hostDir()
		// The container copies what it sees to the test, once a second
		// more than often enough to see a 2 s bound; a torn state would
		// show a and b differing.
		pod := utils.BusyboxPod(ns, "reader", objectsNode, "sh", "-c",
			`while true; do a=$(cat /cfg/a); b=$(cat /cfg/b); echo "$a $b" > /out/seen.tmp; mv /out/seen.tmp /out/seen; [ "$a" = "$b" ] || echo "$a $b" >> /out/torn; sleep 0.1; done`)
		pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}},
		}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
		withOut(pod, out)
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		seen := func() string {
			data, _ := os.ReadFile(filepath.Join(out, "seen"))
			return strings.TrimSpace(string(data))
		}
		Eventually(seen).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Equal("v0 v0"))

		for i := 1; i <= 5; i++ {
			v := fmt.Sprintf("v%d", i)
			Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
			cm.Data = map[string]string{"a": v, "b": v}
			Expect(env.Admin.Update(ctx, cm)).To(Succeed())
			Eventually(seen).WithTimeout(liveUpdateTimeout).WithPolling(50*time.Millisecond).Should(Equal(v+" "+v), "update %d", i)
		}
		Expect(filepath.Join(out, "torn")).NotTo(BeAnExistingFile(), "the container saw a mixed state")
		p := utils.GetPod(ctx, env.Admin, ns, "reader")(Default)
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})

	It("shows CreateContainerConfigError for a missing Secret and runs once it is created", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "needs-secret", objectsNode, "sleep", "3600")
		pod.Spec.Containers[0].Env = []corev1.EnvVar{
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token",
			}}},
			{Name: "EXTRA", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "absent", Optional: ptr.To(true),
			}}},
		}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "needs-secret", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
			g.Expect(w.Message).To(ContainSubstring("creds"))
		})
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
			StringData: map[string]string{"token": "s3cr3t-value-never-logged"},
		}
		Expect(env.Admin.Create(ctx, secret)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "needs-secret", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Expect(env.Nodelet.LogTail(100000)).NotTo(ContainSubstring("s3cr3t-value-never-logged"))
		var events corev1.EventList
		Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			Expect(e.Message).NotTo(ContainSubstring("s3cr3t-value-never-logged"))
		}
	})
})
