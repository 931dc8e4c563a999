package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// podStartTimeout bounds a pod going Running from creation.
	podStartTimeout = 60 * time.Second
	// crashLoopTimeout covers four restarts with the 10 s, 20 s back-off.
	crashLoopTimeout = 3 * time.Minute
	// podNode is the node the pod specs' nodelet runs.
	podNode = "e2e-pods"
)

var _ = Describe("Pod lifecycle", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: podNode, API: apiServer, Containerd: ctrd}
	})

	waitFor := func(ctx SpecContext, ns, name string, timeout time.Duration, check func(Gomega, *corev1.Pod)) *corev1.Pod {
		GinkgoHelper()
		return utils.WaitForPod(ctx, env.Admin, ns, name, timeout, check)
	}

	It("runs a busybox pod to Running and Ready", Label(runtimeSmokeLabel), func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "sleeper", podNode, "sleep", "3600"))).To(Succeed())
		p := waitFor(ctx, ns, "sleeper", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Expect(p.Status.PodIP).NotTo(BeEmpty())
		Expect(p.Status.HostIP).NotTo(BeEmpty())
		Expect(p.Status.StartTime).NotTo(BeNil())
		Expect(p.Status.QOSClass).To(Equal(corev1.PodQOSBestEffort))
		Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		cs := p.Status.ContainerStatuses[0]
		Expect(cs.ContainerID).To(HavePrefix("containerd://"))
		Expect(cs.ImageID).NotTo(BeEmpty())
		Expect(cs.Ready).To(BeTrue())
		Expect(cs.Started).To(Equal(ptr.To(true)))
		Expect(cs.State.Running).NotTo(BeNil())
	})

	It("runs a pod to completion and reports Succeeded with exit code 0", Label(runtimeSmokeLabel), func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "once", podNode, "sh", "-c", "echo done")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "once", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
		})
		term := p.Status.ContainerStatuses[0].State.Terminated
		Expect(term).NotTo(BeNil())
		Expect(term.ExitCode).To(BeZero())
		Expect(term.Reason).To(Equal("Completed"))

		By("keeping the container's log on the node")
		logFile := filepath.Join(env.Nodelet.PodLogsDir, fmt.Sprintf("%s_%s_%s", ns, "once", p.UID), "main", "0.log")
		Expect(os.ReadFile(logFile)).To(ContainSubstring("stdout F done"))
	})

	It("reports a failed container's exit code and termination message under restartPolicy Never", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "fails", podNode, "sh", "-c", "echo -n boom > /dev/termination-log; exit 3")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "fails", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		})
		term := p.Status.ContainerStatuses[0].State.Terminated
		Expect(term).NotTo(BeNil())
		Expect(term.ExitCode).To(BeEquivalentTo(3))
		Expect(term.Reason).To(Equal("Error"))
		Expect(term.Message).To(Equal("boom"))
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})

	It("shows CrashLoopBackOff with a growing restart count and growing back-off", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "crasher", podNode, "sh", "-c", "exit 1"))).To(Succeed())
		restartSeen := map[int32]time.Time{}
		sawBackOff := false
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, "crasher")(g)
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			cs := p.Status.ContainerStatuses[0]
			if _, ok := restartSeen[cs.RestartCount]; !ok {
				restartSeen[cs.RestartCount] = time.Now()
			}
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				sawBackOff = true
			}
			g.Expect(cs.RestartCount).To(BeNumerically(">=", 4))
		}).WithTimeout(crashLoopTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(sawBackOff).To(BeTrue(), "the container never showed CrashLoopBackOff")
		gap := func(n int32) time.Duration {
			GinkgoHelper()
			a, okA := restartSeen[n-1]
			b, okB := restartSeen[n]
			Expect(okA && okB).To(BeTrue(), "restart counts %d and %d were both observed", n-1, n)
			return b.Sub(a)
		}
		// The back-off doubles: the wait before the 4th restart is longer
		// than the one before the 3rd.
		Expect(gap(4)).To(BeNumerically(">", gap(3)), "restarts seen at %v", restartSeen)
	}, SpecTimeout(crashLoopTimeout+30*time.Second))

	It("runs two init containers in order before the main container", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "inits", podNode, "sh", "-c", "cat /work/order; sleep 3600")
		pod.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		mount := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
		pod.Spec.Containers[0].VolumeMounts = mount
		pod.Spec.InitContainers = []corev1.Container{
			{Name: "first", Image: utils.BusyboxImage, Command: []string{"sh", "-c", "sleep 1; echo first >> /work/order"}, VolumeMounts: mount},
			{Name: "second", Image: utils.BusyboxImage, Command: []string{"sh", "-c", "echo second >> /work/order"}, VolumeMounts: mount},
		}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "inits", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		first := p.Status.InitContainerStatuses[0].State.Terminated
		second := p.Status.InitContainerStatuses[1].State.Terminated
		Expect(first).NotTo(BeNil())
		Expect(second).NotTo(BeNil())
		Expect(second.StartedAt.Time).NotTo(BeTemporally("<", first.FinishedAt.Time))
		logFile := filepath.Join(env.Nodelet.PodLogsDir, fmt.Sprintf("%s_%s_%s", ns, "inits", p.UID), "main", "0.log")
		Eventually(func() (string, error) {
			b, err := os.ReadFile(logFile)
			return string(b), err
		}).WithTimeout(containerTimeout).Should(MatchRegexp(`(?s)stdout F first\n.*stdout F second\n`))
	})

	It("gives a container env vars from the file an init container wrote (fileKeyRef), and refuses a link out of the volume", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		envFrom := func(name, key, path string) corev1.EnvVar {
			return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{
				VolumeName: "work", Path: path, Key: key}}}
		}
		pod := utils.BusyboxPod(ns, "envfile", podNode, "sh", "-c", `echo "token=$TOKEN"; sleep 3600`)
		pod.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		mount := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
		pod.Spec.InitContainers = []corev1.Container{{Name: "write", Image: utils.BusyboxImage, VolumeMounts: mount,
			Command: []string{"sh", "-c", "printf \"# written at start\\nTOKEN='s3cr3t value'\\n\" > /work/config.env"}}}
		pod.Spec.Containers[0].Env = []corev1.EnvVar{envFrom("TOKEN", "TOKEN", "config.env")}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		waitFor(ctx, ns, "envfile", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		cs, err := kubernetes.NewForConfig(apiServer.Config)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			out, err := cs.CoreV1().Pods(ns).GetLogs("envfile", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal("token=s3cr3t value\n"))
		}).WithTimeout(containerTimeout).Should(Succeed())

		By("refusing an env file that is a link to a node's file")
		bad := utils.BusyboxPod(ns, "envlink", podNode, "sh", "-c", "sleep 3600")
		bad.Spec.Volumes = pod.Spec.Volumes
		bad.Spec.InitContainers = []corev1.Container{{Name: "write", Image: utils.BusyboxImage, VolumeMounts: mount,
			Command: []string{"sh", "-c", "ln -s /etc/os-release /work/config.env"}}}
		bad.Spec.Containers[0].Env = []corev1.EnvVar{envFrom("NAME", "NAME", "config.env")}
		Expect(env.Admin.Create(ctx, bad)).To(Succeed())
		waitFor(ctx, ns, "envlink", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("CreateContainerConfigError"))
		})
	})

	It("never starts the main container when an init container fails", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "badinit", podNode, "sleep", "3600")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: utils.BusyboxImage, Command: []string{"sh", "-c", "exit 2"}}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "badinit", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
		})
		Expect(p.Status.InitContainerStatuses[0].State.Terminated.ExitCode).To(BeEquivalentTo(2))
		main := p.Status.ContainerStatuses[0]
		Expect(main.ContainerID).To(BeEmpty())
		Expect(main.State.Running).To(BeNil())
	})

	It("pulls from a registry with basic auth with the right pull secret, and backs off with a wrong one", func(ctx SpecContext) {
		const user, password = "puller", "s3cret"
		reg := utils.MustStartRegistry(ctx, utils.RegistryOptions{User: user, Password: password})
		Expect(ctrd.AddInsecureRegistry(reg.Host())).To(Succeed())
		ref, err := reg.PushVariant(ctx, utils.BusyboxImage, "pull-secret")
		Expect(err).NotTo(HaveOccurred())
		ns := utils.NewNamespace(ctx, env.Admin)
		pullSecret := func(name, pass string) *corev1.Secret {
			auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
			cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host(): map[string]string{"auth": auth}}})
			return &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Type:       corev1.SecretTypeDockerConfigJson,
				Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
			}
		}
		Expect(env.Admin.Create(ctx, pullSecret("right", password))).To(Succeed())
		Expect(env.Admin.Create(ctx, pullSecret("wrong", "nope"))).To(Succeed())
		podWith := func(name, secret string) *corev1.Pod {
			p := utils.BusyboxPod(ns, name, podNode, "sleep", "3600")
			p.Spec.Containers[0].Image = ref
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret}}
			return p
		}
		Expect(env.Admin.Create(ctx, podWith("good", "right"))).To(Succeed())
		Expect(env.Admin.Create(ctx, podWith("bad", "wrong"))).To(Succeed())
		waitFor(ctx, ns, "good", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		// ErrImagePull shows for a moment after each failed pull, then
		// ImagePullBackOff while the back-off lasts; the Events keep both.
		waitFor(ctx, ns, "bad", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("ImagePullBackOff"))
		})
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var messages []string
			for _, e := range events.Items {
				if e.InvolvedObject.Name == "bad" {
					messages = append(messages, e.Reason+": "+e.Message)
				}
			}
			g.Expect(messages).To(ContainElement(HavePrefix("Failed: Error: ErrImagePull")))
			g.Expect(messages).To(ContainElement(HavePrefix("BackOff: Back-off pulling image")))
		}).WithTimeout(apiTimeout).Should(Succeed())
	})

	It("runs the preStop hook and honours the grace period before the pod disappears", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		hostDir := GinkgoT().TempDir()
		pod := utils.BusyboxPod(ns, "graceful", podNode, "sh", "-c", "trap 'echo got TERM' TERM; while true; do sleep 1; done")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](4)
		pod.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo prestop > /host/prestop"}},
		}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		p := waitFor(ctx, ns, "graceful", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		containerID := p.Status.ContainerStatuses[0].ContainerID[len("containerd://"):]
		rs, _ := newCRIClients(ctx)

		deleted := time.Now()
		Expect(env.Admin.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool {
			err := env.Admin.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(BeTrue())
		gone := time.Since(deleted)

		Expect(os.ReadFile(filepath.Join(hostDir, "prestop"))).To(Equal([]byte("prestop\n")))
		// The container ignores SIGTERM, so it only stops when the grace
		// period is over: the object cannot have gone before.
		Expect(gone).To(BeNumerically(">=", 3*time.Second))
		_, err := rs.ContainerStatus(ctx, containerID, false)
		Expect(err).To(HaveOccurred(), "the container is removed before the pod object goes")
	})

	It("never touches runtime objects nodelet does not own", func(ctx SpecContext) {
		rs, _ := newCRIClients(ctx)
		ns := utils.NewNamespace(ctx, env.Admin)
		// The kubelet's labels of a pod that exists in the API, but no
		// ownership label: nodelet must leave them alone.
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "namesake", podNode, "sleep", "3600"))).To(Succeed())
		labels := map[string]string{
			"io.kubernetes.pod.name": "namesake", "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": "not-nodelets",
		}
		sbCfg := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: "foreign", Namespace: ns, Uid: "not-nodelets"},
			Labels:       labels,
			LogDirectory: GinkgoT().TempDir(),
			Linux:        &runtimeapi.LinuxPodSandboxConfig{},
		}
		sandboxID, err := rs.RunPodSandbox(ctx, sbCfg, "")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = rs.StopPodSandbox(ctx, sandboxID)
			_ = rs.RemovePodSandbox(ctx, sandboxID)
		})
		cID, err := rs.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "foreign"},
			Image:    &runtimeapi.ImageSpec{Image: utils.BusyboxImage},
			Command:  []string{"sleep", "3600"},
			Labels:   map[string]string{"io.kubernetes.pod.name": "namesake", "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": "not-nodelets", "io.kubernetes.container.name": "main"},
			LogPath:  "foreign.log",
		}, sbCfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(rs.StartContainer(ctx, cID)).To(Succeed())

		waitFor(ctx, ns, "namesake", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		By("deleting the namesake pod and restarting nodelet, whose start-up cleans orphans")
		Expect(env.Admin.Delete(ctx, utils.BusyboxPod(ns, "namesake", podNode))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "namesake"}, &corev1.Pod{}))
		}).WithTimeout(podStartTimeout).Should(BeTrue())
		Expect(env.Nodelet.Kill()).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		Consistently(func(g Gomega) {
			st, err := rs.ContainerStatus(ctx, cID, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.GetStatus().GetState()).To(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))
			sb, err := rs.PodSandboxStatus(ctx, sandboxID, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sb.GetStatus().GetState()).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY))
		}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("adopts its running pods after being killed: no restart, same sandboxes, no status write", Label(runtimeSmokeLabel), func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		const n = 10
		for i := range n {
			Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, fmt.Sprintf("adopt-%d", i), podNode, "sleep", "3600"))).To(Succeed())
		}
		before := map[string]corev1.Pod{}
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(env.Admin.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(n))
			for _, p := range pods.Items {
				g.Expect(utils.PodReady(&p)).To(BeTrue(), "pod %s", p.Name)
				before[p.Name] = p
			}
		}).WithTimeout(2 * podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		rs, _ := newCRIClients(ctx)
		sandboxesBefore, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
		Expect(err).NotTo(HaveOccurred())
		Expect(sandboxesBefore).To(HaveLen(n))

		Expect(env.Nodelet.Kill()).To(Succeed())
		By("corrupting one pod's checkpoint: its state is rebuilt from the runtime")
		corrupted := filepath.Join(env.Nodelet.RootDir, "checkpoints", "pod-"+string(before["adopt-0"].UID))
		Expect(os.WriteFile(corrupted, []byte(`{"version":1,"data":{"uid":"torn`), 0o600)).To(Succeed())
		Expect(env.Nodelet.Restart(ctx)).To(Succeed())
		// Several relist periods and a full resync of every pod.
		Consistently(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(env.Admin.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				b := before[p.Name]
				g.Expect(p.ResourceVersion).To(Equal(b.ResourceVersion), "pod %s was written", p.Name)
				g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal(b.Status.ContainerStatuses[0].ContainerID))
				g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
			}
		}).WithTimeout(8 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		sandboxesAfter, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
		Expect(err).NotTo(HaveOccurred())
		ids := func(list []*runtimeapi.PodSandbox) []string {
			var out []string
			for _, s := range list {
				out = append(out, s.Id)
			}
			return out
		}
		Expect(ids(sandboxesAfter)).To(ConsistOf(ids(sandboxesBefore)))
		quarantined, err := filepath.Glob(corrupted + ".corrupt-*")
		Expect(err).NotTo(HaveOccurred())
		Expect(quarantined).To(HaveLen(1), "the corrupt checkpoint is set aside")
		info, err := os.Stat(corrupted)
		Expect(err).NotTo(HaveOccurred(), "the state is written again from the runtime")
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	})
})

var _ = Describe("Pod admission", Ordered, func() {
	const node = "e2e-admission"
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd,
			Config: map[string]any{"maxPods": 2, "nodeLabels": map[string]string{"disk": "ssd"}}}
	})

	failedWith := func(ctx SpecContext, ns, name, reason string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, env.Admin, ns, name)(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal(reason))
			g.Expect(p.Status.Message).To(HavePrefix("Pod was rejected: "))
			// The rejection is the node's answer to the pod's spec as
			// created: the generation it saw.
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		var events corev1.EventList
		Eventually(func(g Gomega) {
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			found := false
			for _, e := range events.Items {
				found = found || (e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning)
			}
			g.Expect(found).To(BeTrue(), "a %s event for %s", reason, name)
		}).WithTimeout(apiTimeout).Should(Succeed())
	}

	It("rejects a pod above maxPods with OutOfpods", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		for _, name := range []string{"one", "two"} {
			Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, name, node, "sleep", "3600"))).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(utils.GetPod(ctx, env.Admin, ns, name)(g).Status.Phase).To(Equal(corev1.PodRunning))
			}).WithTimeout(podStartTimeout).Should(Succeed())
		}
		Expect(env.Admin.Create(ctx, utils.BusyboxPod(ns, "three", node, "sleep", "3600"))).To(Succeed())
		failedWith(ctx, ns, "three", "OutOfpods")
		p := utils.GetPod(ctx, env.Admin, ns, "three")(Default)
		Expect(p.Status.ContainerStatuses).To(BeEmpty(), "a rejected pod is never started")
		for _, name := range []string{"one", "two"} {
			Expect(env.Admin.Delete(ctx, utils.BusyboxPod(ns, name, node))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(env.Admin.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
		}).WithTimeout(podStartTimeout).Should(Succeed())
	})

	It("rejects a pod whose nodeSelector does not match with NodeAffinity", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "picky", node, "sleep", "3600")
		pod.Spec.NodeSelector = map[string]string{"disk": "hdd"}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		failedWith(ctx, ns, "picky", "NodeAffinity")
	})
})
