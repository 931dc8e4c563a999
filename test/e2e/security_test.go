package e2e

import (
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// securityNode is the node the security specs' nodelet runs.
	securityNode = "e2e-security"
	// securityTimeout covers a sandbox, a container and a first probe.
	securityTimeout = 60 * time.Second
)

// denyMkdirProfile is a seccomp profile that allows everything but mkdir.
const denyMkdirProfile = `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`

var _ = Describe("Security", Ordered, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: securityNode, API: apiServer, Containerd: ctrd,
			Config: map[string]any{
				"allowedUnsafeSysctls": []string{"kernel.msg*"},
				// Restarts every second, so the subPath race is tried often.
				"crashLoopBackOff":          map[string]any{"maxContainerRestartPeriod": "1s"},
				"nodeStatusUpdateFrequency": "2s",
				"nodeStatusReportFrequency": "2s",
			}}
	})

	// readyWhen makes the pod's container Ready only when cmd succeeds in it.
	readyWhen := func(p *corev1.Pod, cmd string) *corev1.Pod {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", cmd}}},
			PeriodSeconds: 1,
		}
		return p
	}
	withSysctl := func(p *corev1.Pod, name, value string) *corev1.Pod {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: name, Value: value}}}
		return p
	}
	expectReady := func(ctx SpecContext, ns, name string) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, securityTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(ConsistOf(HaveField("Ready", true)))
		})
	}
	expectRejected := func(ctx SpecContext, ns, name, reason, msg string) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, securityTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal(reason))
			g.Expect(p.Status.Message).To(ContainSubstring(msg))
		})
	}
	expectWaiting := func(ctx SpecContext, ns, name, reason, msg string) {
		GinkgoHelper()
		utils.WaitForPod(ctx, env.Admin, ns, name, securityTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal(reason))
			g.Expect(w.Message).To(ContainSubstring(msg))
		})
	}

	It("rejects an unsafe sysctl, runs an allowed unsafe one and a safe one", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		forbidden := withSysctl(utils.BusyboxPod(ns, "forbidden", securityNode, "sleep", "3600"), "kernel.sem", "250 32000 32 128")
		allowed := readyWhen(withSysctl(utils.BusyboxPod(ns, "allowed", securityNode, "sleep", "3600"), "kernel.msgmax", "12345"),
			`test "$(cat /proc/sys/kernel/msgmax)" = 12345`)
		safe := readyWhen(withSysctl(utils.BusyboxPod(ns, "safe", securityNode, "sleep", "3600"), "net.ipv4.ip_unprivileged_port_start", "80"),
			`test "$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)" = 80`)
		for _, p := range []*corev1.Pod{forbidden, allowed, safe} {
			Expect(env.Admin.Create(ctx, p)).To(Succeed())
		}
		expectRejected(ctx, ns, "forbidden", "SysctlForbidden", `forbidden sysctl: "kernel.sem" not allowlisted`)
		expectReady(ctx, ns, "allowed")
		expectReady(ctx, ns, "safe")
	})

	It("hides the kernel's /proc and /sys files from a container and keeps /proc/sys read-only, except in a privileged one", func(ctx SpecContext) {
		// /proc/timer_list stands for the masked files: /proc/kcore, the
		// best known, is absent from kernels built without it.
		ns := utils.NewNamespace(ctx, env.Admin)
		// A masked file is /dev/null mounted over it, a masked directory
		// an empty tmpfs; a read-only path is a read-only bind mount of
		// itself.
		const masked = `test -c /proc/timer_list && grep -q ' /sys/firmware ' /proc/self/mountinfo`
		const readOnly = `awk '$5 == "/proc/sys" && $6 ~ /^ro/ { found = 1 } END { exit !found }' /proc/self/mountinfo`
		plain := readyWhen(utils.BusyboxPod(ns, "plain", securityNode, "sleep", "3600"), masked+" && "+readOnly)
		privileged := readyWhen(utils.BusyboxPod(ns, "privileged", securityNode, "sleep", "3600"), "test -f /proc/timer_list")
		privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		Expect(env.Admin.Create(ctx, plain)).To(Succeed())
		Expect(env.Admin.Create(ctx, privileged)).To(Succeed())
		expectReady(ctx, ns, "plain")
		expectReady(ctx, ns, "privileged")
	})

	It("refuses runAsNonRoot with a root image and runs as the given non-root user", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		root := utils.BusyboxPod(ns, "root", securityNode, "sleep", "3600")
		root.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
		user := readyWhen(utils.BusyboxPod(ns, "user", securityNode, "sleep", "3600"), `test "$(id -u)" = 1000`)
		user.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}
		Expect(env.Admin.Create(ctx, root)).To(Succeed())
		Expect(env.Admin.Create(ctx, user)).To(Succeed())
		expectWaiting(ctx, ns, "root", "CreateContainerConfigError",
			`container has runAsNonRoot and image will run as root (pod: "root_`+ns)
		expectReady(ctx, ns, "user")
	})

	It("runs an image whose config names uid 1000 with runAsNonRoot and refuses a user name it cannot verify", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		nonRoot := &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
		uid := readyWhen(utils.BusyboxPod(ns, "uid", securityNode, "sleep", "3600"), `test "$(id -u)" = 1000`)
		uid.Spec.Containers[0].Image = utils.BusyboxUID1000Image
		uid.Spec.Containers[0].SecurityContext = nonRoot
		named := utils.BusyboxPod(ns, "named", securityNode, "sleep", "3600")
		named.Spec.Containers[0].Image = utils.BusyboxNamedUserImage
		named.Spec.Containers[0].SecurityContext = nonRoot.DeepCopy()
		Expect(env.Admin.Create(ctx, uid)).To(Succeed())
		Expect(env.Admin.Create(ctx, named)).To(Succeed())
		expectReady(ctx, ns, "uid")
		expectWaiting(ctx, ns, "named", "CreateContainerConfigError",
			"container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root")
	})

	It("runs with runAsUser, runAsGroup, supplementalGroups and hands an emptyDir to the fsGroup", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := readyWhen(utils.BusyboxPod(ns, "groups", securityNode, "sh", "-c", "touch /data/made; sleep 3600"), strings.Join([]string{
			`test "$(id -u)" = 1000`, `test "$(id -g)" = 3000`,
			`id -G | grep -qw 2000`, `id -G | grep -qw 4000`,
			`test "$(stat -c %g /data)" = 2000`, `test "$(stat -c %g /data/made)" = 2000`,
			`stat -c %A /data | grep -q '^drwxrwsrwx$'`,
		}, " && "))
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000),
			FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{4000},
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		expectReady(ctx, ns, "groups")
	})

	It("never mounts a host directory through a subPath another container swaps for a link", func(ctx SpecContext) {
		hostDirs := []string{"/", "/etc", "/usr", "/var", "/root", "/tmp"}
		modesBefore := modesOf(hostDirs)
		ns := utils.NewNamespace(ctx, env.Admin)
		// Bursts of swaps as fast as the shell goes, then a rest as a
		// directory, so that some starts find a directory that stays from
		// nodelet's bind mount to runc's. runc 1.2 and later refuse to
		// mount a bind whose directory was removed meanwhile (runc 1.1
		// mounted it), so a start only succeeds when a rest covers both:
		// 3 s, not 1, on a loaded machine.
		pod := utils.BusyboxPod(ns, "swap", securityNode, "sh", "-c", `cd /shared; while true; do
			i=0; while [ $i -lt 100 ]; do rm -rf dir; ln -s / dir; rm -f dir; mkdir dir; i=$((i+1)); done
			sleep 3
		done`)
		pod.Spec.Containers[0].Name = "swapper"
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
		// The victim records what its subPath mount shows and exits, to be
		// started again a second later: every start is one more try of the
		// race between nodelet preparing the mount and the swapper.
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: "victim", Image: utils.BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sh", "-c", `if [ -e /mnt/etc/os-release ] || [ -e /mnt/usr/bin ] || [ -e /mnt/var ]; then echo escaped >> /results/log; else echo contained >> /results/log; fi; exit 1`},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "shared", MountPath: "/mnt", SubPath: "dir"},
				{Name: "results", MountPath: "/results"},
			},
		})
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "results", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		results := filepath.Join(env.Nodelet.RootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "results", "log")
		Consistently(func(g Gomega) {
			data, _ := os.ReadFile(results)
			g.Expect(string(data)).NotTo(ContainSubstring("escaped"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		// On a loaded machine a start can take longer than the swapper's
		// rest, so every try in the first minute may fail at runc's mount:
		// keep watching, still for an escape, until three starts ran.
		starts := 0
		Eventually(func(g Gomega) {
			data, err := os.ReadFile(results)
			if strings.Contains(string(data), "escaped") {
				StopTrying("the victim saw a host directory through its subPath").Now()
			}
			g.Expect(err).NotTo(HaveOccurred(), "the victim never ran")
			starts = strings.Count(string(data), "contained")
			// Most starts in a burst fail (the directory is a link, or gone
			// by the time runc mounts it); every one of them was a try.
			g.Expect(starts).To(BeNumerically(">=", 3), "the victim must have been started over and over")
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), func() string {
			p := &corev1.Pod{}
			_ = env.Admin.Get(ctx, client.ObjectKeyFromObject(pod), p)
			return fmt.Sprintf("pod status: %v\nnodelet log:\n%s", p.Status, env.Nodelet.LogTail(30))
		})
		GinkgoWriter.Printf("the victim started %d times with its subPath contained\n", starts)
		Expect(modesOf(hostDirs)).To(Equal(modesBefore), "no host directory's mode may change")

		By("deleting the pod, which unmounts its subPaths and removes its directory")
		Expect(env.Admin.Delete(ctx, pod)).To(Succeed())
		podDir := filepath.Join(env.Nodelet.RootDir, "pods", string(pod.UID))
		Eventually(func(g Gomega) {
			_, err := os.Stat(podDir)
			g.Expect(err).To(MatchError(fs.ErrNotExist))
		}).WithContext(ctx).WithTimeout(securityTimeout).Should(Succeed())
		mountinfo, err := os.ReadFile("/proc/self/mountinfo")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(mountinfo)).NotTo(ContainSubstring(string(pod.UID)), "a mount of the pod is left behind")
	})

	It("expands subPathExpr from the downward API into its own directory and refuses one that leaves the volume", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		fieldRef := func(path string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
		}
		withSubPathExpr := func(p *corev1.Pod, expr string, env ...corev1.EnvVar) *corev1.Pod {
			p.Spec.Containers[0].Env = env
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
				{Name: "data", MountPath: "/sub", SubPathExpr: expr},
				{Name: "data", MountPath: "/vol"},
			}
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			return p
		}
		expanded := readyWhen(withSubPathExpr(utils.BusyboxPod(ns, "expanded", securityNode, "sh", "-c", "echo hi > /sub/marker; sleep 3600"),
			"logs/$(POD_NAME)", corev1.EnvVar{Name: "POD_NAME", ValueFrom: fieldRef("metadata.name")}),
			"test -f /vol/logs/expanded/marker")
		up := withSubPathExpr(utils.BusyboxPod(ns, "up", securityNode, "sleep", "3600"),
			"$(DIR)", corev1.EnvVar{Name: "DIR", Value: ".."})
		absolute := withSubPathExpr(utils.BusyboxPod(ns, "absolute", securityNode, "sleep", "3600"),
			"$(DIR)", corev1.EnvVar{Name: "DIR", Value: "/tmp"})
		// The annotation is not there yet: the container waits for it.
		annotated := readyWhen(withSubPathExpr(utils.BusyboxPod(ns, "annotated", securityNode, "sh", "-c", "touch /sub/marker; sleep 3600"),
			"$(ANNOTATION)/$(POD_NAME)",
			corev1.EnvVar{Name: "POD_NAME", ValueFrom: fieldRef("metadata.name")},
			corev1.EnvVar{Name: "ANNOTATION", ValueFrom: fieldRef("metadata.annotations['mysubpath']")}),
			"test -f /vol/mypath/annotated/marker")
		for _, p := range []*corev1.Pod{expanded, up, absolute, annotated} {
			Expect(env.Admin.Create(ctx, p)).To(Succeed())
		}

		expectReady(ctx, ns, "expanded")
		p := &corev1.Pod{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(expanded), p)).To(Succeed())
		onHost := filepath.Join(env.Nodelet.RootDir, "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "data", "logs", "expanded", "marker")
		Expect(os.ReadFile(onHost)).To(Equal([]byte("hi\n")), "the file written to the subPathExpr mount is in the pod's directory of the volume")

		By("refusing expansions that are absolute or go up, with the kubelet's messages")
		expectWaiting(ctx, ns, "up", "CreateContainerConfigError", "unable to provision SubPath `..`: must not contain '..'")
		expectWaiting(ctx, ns, "absolute", "CreateContainerConfigError", "error SubPath `/tmp` must not be an absolute path")

		By("waiting for a variable without a value, and starting once the annotation it reads is set")
		expectWaiting(ctx, ns, "annotated", "CreateContainerConfigError", "missing value for ANNOTATION")
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(annotated), p)).To(Succeed())
		patched := p.DeepCopy()
		patched.Annotations = map[string]string{"mysubpath": "mypath"}
		Expect(env.Admin.Patch(ctx, patched, client.MergeFrom(p))).To(Succeed())
		expectReady(ctx, ns, "annotated")
	})

	It("runs an https preStop hook against a server with a self-signed certificate", func(ctx SpecContext) {
		hostIP, err := ctrd.HostIP()
		Expect(err).NotTo(HaveOccurred())
		hits := make(chan string, 4)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits <- r.URL.Path
		}))
		srv.Listener, err = net.Listen("tcp", net.JoinHostPort(hostIP.String(), "0"))
		Expect(err).NotTo(HaveOccurred())
		srv.StartTLS() // httptest's certificate: self-signed as far as nodelet knows
		DeferCleanup(srv.Close)
		port := srv.Listener.Addr().(*net.TCPAddr).Port

		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "hooked", securityNode, "sleep", "3600")
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Scheme: corev1.URISchemeHTTPS, Host: hostIP.String(), Port: intstr.FromInt(port), Path: "/pre-stop",
		}}}
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "hooked", securityTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		Expect(env.Admin.Delete(ctx, pod)).To(Succeed())
		Eventually(hits).WithContext(ctx).WithTimeout(securityTimeout).Should(Receive(Equal("/pre-stop")))
	})

	It("keeps an address another client added to the Node's status", func(ctx SpecContext) {
		node := &corev1.Node{}
		Expect(env.Admin.Get(ctx, client.ObjectKey{Name: securityNode}, node)).To(Succeed())
		added := corev1.NodeAddress{Type: corev1.NodeExternalDNS, Address: "node.e2e.example"}
		patched := node.DeepCopy()
		patched.Status.Addresses = append(patched.Status.Addresses, added)
		Expect(env.Admin.Status().Patch(ctx, patched, client.MergeFrom(node))).To(Succeed())
		patchedAt := time.Now()
		// Several of nodelet's status updates (every 2 s here) later, both
		// its own address and the added one are there.
		Eventually(func(g Gomega) {
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Name: securityNode}, node)).To(Succeed())
			g.Expect(readyHeartbeat(node)).To(BeTemporally(">", patchedAt.Add(5*time.Second)))
		}).WithContext(ctx).WithTimeout(securityTimeout).WithPolling(time.Second).Should(Succeed())
		Expect(node.Status.Addresses).To(ContainElement(added))
		Expect(node.Status.Addresses).To(ContainElement(HaveField("Type", corev1.NodeInternalIP)))
	})

	It("rejects AppArmor profiles the node cannot enforce and runs unconfined ones", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		withAppArmor := func(name string, p *corev1.AppArmorProfile) *corev1.Pod {
			pod := utils.BusyboxPod(ns, name, securityNode, "sleep", "3600")
			pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: p}
			return pod
		}
		unconfined := withAppArmor("unconfined", &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined})
		defaulted := withAppArmor("runtime-default", &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault})
		absent := withAppArmor("absent", &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("nodelet-e2e-absent")})
		for _, p := range []*corev1.Pod{unconfined, defaulted, absent} {
			Expect(env.Admin.Create(ctx, p)).To(Succeed())
		}
		expectReady(ctx, ns, "unconfined")
		if err := (admission.SysAppArmor{}).Enabled(); err != nil {
			By("on this host without AppArmor, every profile but unconfined is refused")
			expectRejected(ctx, ns, "runtime-default", "AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host")
			expectRejected(ctx, ns, "absent", "AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host")
			return
		}
		By("on this host with AppArmor, a profile that is not loaded is refused")
		expectReady(ctx, ns, "runtime-default")
		expectRejected(ctx, ns, "absent", "AppArmor", `Cannot enforce AppArmor: profile "nodelet-e2e-absent" is not loaded`)
	})

	It("applies a Localhost seccomp profile from the profile root and names a missing one", func(ctx SpecContext) {
		dir := filepath.Join(env.Nodelet.RootDir, "seccomp", "e2e")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "deny-mkdir.json"), []byte(denyMkdirProfile), 0o644)).To(Succeed())
		ns := utils.NewNamespace(ctx, env.Admin)
		profile := func(p *corev1.Pod, path string) *corev1.Pod {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(path)}}
			return p
		}
		denied := readyWhen(profile(utils.BusyboxPod(ns, "denied", securityNode, "sh", "-c",
			"mkdir /tmp/made || touch /tmp/denied; sleep 3600"), "e2e/deny-mkdir.json"), "test -f /tmp/denied && test ! -d /tmp/made")
		missing := profile(utils.BusyboxPod(ns, "missing", securityNode, "sleep", "3600"), "e2e/absent.json")
		Expect(env.Admin.Create(ctx, denied)).To(Succeed())
		Expect(env.Admin.Create(ctx, missing)).To(Succeed())
		expectReady(ctx, ns, "denied")
		expectWaiting(ctx, ns, "missing", "CreateContainerError", filepath.Join(env.Nodelet.RootDir, "seccomp", "e2e", "absent.json"))
	})

	It("rejects a pod asking for a host port on the node IP that another pod binds on 0.0.0.0", func(ctx SpecContext) {
		hostIP, err := ctrd.HostIP()
		Expect(err).NotTo(HaveOccurred())
		ns := utils.NewNamespace(ctx, env.Admin)
		first := utils.BusyboxPod(ns, "wildcard", securityNode, "sleep", "3600")
		first.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		Expect(env.Admin.Create(ctx, first)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "wildcard", securityTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		second := utils.BusyboxPod(ns, "node-ip", securityNode, "sleep", "3600")
		second.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: hostIP.String()}}
		Expect(env.Admin.Create(ctx, second)).To(Succeed())
		expectRejected(ctx, ns, "node-ip", "NodePorts", "TCP/"+hostIP.String()+":8080")
	})
})

// modesOf returns the mode of each path.
func modesOf(paths []string) map[string]fs.FileMode {
	GinkgoHelper()
	modes := make(map[string]fs.FileMode, len(paths))
	for _, p := range paths {
		info, err := os.Stat(p)
		Expect(err).NotTo(HaveOccurred())
		modes[p] = info.Mode()
	}
	return modes
}

// readyHeartbeat is when the node agent last reported its Ready condition.
func readyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}
