package e2e

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

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
			Config: map[string]any{"allowedUnsafeSysctls": []string{"kernel.msg*"}}}
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
