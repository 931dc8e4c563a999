package e2e

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/net/websocket"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// nodeAPINode is the node of the node API specs.
	nodeAPINode = "e2e-nodeapi"
	// kubectlTimeout bounds one kubectl call that returns by itself.
	kubectlTimeout = 30 * time.Second
	// restartTimeout covers a container's first restart (10 s back-off).
	restartTimeout = 90 * time.Second
)

var _ = Describe("The node API through the API server", Ordered, ContinueOnFailure, func() {
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: nodeAPINode, API: apiServer, Containerd: ctrd}
	})
	var (
		admin   client.Client
		nodelet *utils.Nodelet
		ns      string
	)

	// kubectl runs the envtest-built kubectl as the admin and returns its
	// stdout, stderr and exit code.
	kubectl := func(ctx context.Context, stdin io.Reader, args ...string) (string, string, int) {
		GinkgoHelper()
		ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
		defer cancel()
		cmd, err := apiServer.Kubectl(ctx, args...)
		Expect(err).NotTo(HaveOccurred())
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
		err = cmd.Run()
		code := 0
		if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		return stdout.String(), stderr.String(), code
	}
	mustKubectl := func(ctx context.Context, args ...string) string {
		GinkgoHelper()
		out, errOut, code := kubectl(ctx, nil, args...)
		Expect(code).To(BeZero(), "kubectl %v: %s", args, errOut)
		return out
	}
	// startPod creates a busybox pod in the spec namespace and waits for it
	// to run.
	startPod := func(ctx context.Context, pod *corev1.Pod) {
		GinkgoHelper()
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, admin, ns, pod.Name)(g)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
	}
	// sh is a busybox pod running script with sh -c.
	sh := func(name, script string) *corev1.Pod {
		return utils.BusyboxPod(ns, name, nodeAPINode, "sh", "-c", script)
	}

	BeforeAll(func(ctx SpecContext) {
		admin, nodelet = env.Admin, env.Nodelet
		ns = utils.NewNamespace(ctx, admin)
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: nodeAPINode}, node)).To(Succeed())
			g.Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).NotTo(BeZero())
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		// Started first: --since needs a line older than the window.
		Expect(admin.Create(ctx, sh("since", "echo early; sleep 12; echo late; sleep 3600"))).To(Succeed())
	}, NodeTimeout(2*podStartTimeout))

	It("reports the served port as the Node's kubelet endpoint", func(ctx SpecContext) {
		node := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: nodeAPINode}, node)).To(Succeed())
		Expect(nodelet.ServerAddr).To(HaveSuffix(fmt.Sprintf(":%d", node.Status.DaemonEndpoints.KubeletEndpoint.Port)))
	})

	It("serves kubectl logs with --tail, --timestamps and --limit-bytes", Label(runtimeSmokeLabel), func(ctx SpecContext) {
		startPod(ctx, sh("logs", "for i in $(seq 1 20); do echo line $i; done; sleep 3600"))
		var want strings.Builder
		for i := 1; i <= 20; i++ {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		Eventually(func(g Gomega) {
			out, errOut, code := kubectl(ctx, nil, "logs", "-n", ns, "logs")
			g.Expect(code).To(BeZero(), errOut)
			g.Expect(out).To(Equal(want.String()))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())

		Expect(mustKubectl(ctx, "logs", "-n", ns, "logs", "--tail=5")).To(Equal("line 16\nline 17\nline 18\nline 19\nline 20\n"))
		Expect(mustKubectl(ctx, "logs", "-n", ns, "logs", "--limit-bytes=10")).To(Equal("line 1\nlin"))

		stamped := strings.Split(strings.TrimSuffix(mustKubectl(ctx, "logs", "-n", ns, "logs", "--timestamps", "--tail=2"), "\n"), "\n")
		Expect(stamped).To(HaveLen(2))
		for i, line := range stamped {
			ts, text, ok := strings.Cut(line, " ")
			Expect(ok).To(BeTrue(), line)
			parsed, err := time.Parse(time.RFC3339Nano, ts)
			Expect(err).NotTo(HaveOccurred(), line)
			Expect(parsed).To(BeTemporally("~", time.Now(), 5*time.Minute))
			Expect(text).To(Equal(fmt.Sprintf("line %d", 19+i)))
		}
	}, SpecTimeout(podStartTimeout+2*apiTimeout))

	It("streams a log over a websocket, as Kubernetes' conformance suite reads it", func(ctx SpecContext) {
		// The API server copies the node's log response into binary
		// websocket frames; a response with a Content-Length used to come
		// out empty there.
		var want strings.Builder
		for i := 1; i <= 20; i++ {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		Expect(websocketLog(ctx, ns, "logs", "")).To(Equal(want.String()))
		Expect(websocketLog(ctx, ns, "logs", "tailLines=1")).To(Equal("line 20\n"))
	}, SpecTimeout(apiTimeout))

	It("serves kubectl logs --since", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			out, errOut, code := kubectl(ctx, nil, "logs", "-n", ns, "since")
			g.Expect(code).To(BeZero(), errOut)
			g.Expect(out).To(Equal("early\nlate\n"))
		}).WithTimeout(podStartTimeout).WithPolling(time.Second).Should(Succeed())
		// "early" was written at least 12 s before "late".
		Expect(mustKubectl(ctx, "logs", "-n", ns, "since", "--since=10s")).To(Equal("late\n"))
	}, SpecTimeout(podStartTimeout+apiTimeout))

	It("follows a log with kubectl logs -f", func(ctx SpecContext) {
		startPod(ctx, sh("follow", "echo before; while [ ! -f /tmp/go ]; do sleep 0.2; done; echo after; sleep 3600"))
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cmd, err := apiServer.Kubectl(fctx, "logs", "-f", "-n", ns, "follow")
		Expect(err).NotTo(HaveOccurred())
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		Expect(cmd.Start()).To(Succeed())
		defer func() { cancel(); _ = cmd.Wait() }()
		Eventually(out.String).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Equal("before\n"))
		mustKubectl(ctx, "exec", "-n", ns, "follow", "--", "touch", "/tmp/go")
		Eventually(out.String).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Equal("before\nafter\n"))
	}, SpecTimeout(podStartTimeout+3*apiTimeout))

	It("serves kubectl logs --previous after a restart", func(ctx SpecContext) {
		// The first run exits, the second one stays, so that the current
		// and the previous container are both stable when read.
		pod := sh("restarts", "echo run-$(cat /proc/sys/kernel/random/uuid); "+
			"if [ -f /data/ran ]; then exec sleep 3600; fi; touch /data/ran; exit 1")
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			p := utils.GetPod(ctx, admin, ns, "restarts")(g)
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
			g.Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
		}).WithTimeout(restartTimeout).WithPolling(pollInterval).Should(Succeed())
		var previous, current string
		Eventually(func(g Gomega) {
			var errOut string
			var code int
			previous, errOut, code = kubectl(ctx, nil, "logs", "--previous", "-n", ns, "restarts")
			g.Expect(code).To(BeZero(), "%s\nstatus: %+v", errOut, utils.GetPod(ctx, admin, ns, "restarts")(g).Status.ContainerStatuses)
			current, errOut, code = kubectl(ctx, nil, "logs", "-n", ns, "restarts")
			g.Expect(code).To(BeZero(), errOut)
			g.Expect(previous).To(MatchRegexp(`^run-[0-9a-f-]{36}\n$`))
			g.Expect(current).To(MatchRegexp(`^run-[0-9a-f-]{36}\n$`))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(previous).NotTo(Equal(current), "--previous shows the current run")

		_, errOut, code := kubectl(ctx, nil, "logs", "--previous", "-n", ns, "since")
		Expect(code).NotTo(BeZero())
		Expect(errOut).To(ContainSubstring("previous terminated container"))
	}, SpecTimeout(restartTimeout+2*apiTimeout))

	Describe("exec", func() {
		BeforeAll(func(ctx SpecContext) {
			startPod(ctx, utils.BusyboxPod(ns, "shell", nodeAPINode, "sleep", "3600"))
		}, NodeTimeout(podStartTimeout))

		It("prints exactly what the command prints", Label(runtimeSmokeLabel), func(ctx SpecContext) {
			out, errOut, code := kubectl(ctx, nil, "exec", "-n", ns, "shell", "--", "echo", "hi")
			Expect(code).To(BeZero(), errOut)
			Expect(out).To(Equal("hi\n"))
		}, SpecTimeout(apiTimeout))

		It("passes stdin with -i", func(ctx SpecContext) {
			out, errOut, code := kubectl(ctx, strings.NewReader("from stdin\nsecond line\n"), "exec", "-i", "-n", ns, "shell", "--", "cat")
			Expect(code).To(BeZero(), errOut)
			Expect(out).To(Equal("from stdin\nsecond line\n"))
		}, SpecTimeout(apiTimeout))

		It("passes the exit code and stderr through", func(ctx SpecContext) {
			out, errOut, code := kubectl(ctx, nil, "exec", "-n", ns, "shell", "--", "sh", "-c", "echo to-stderr >&2; exit 3")
			Expect(code).To(Equal(3), "stdout %q stderr %q", out, errOut)
			Expect(errOut).To(ContainSubstring("to-stderr"))
		}, SpecTimeout(apiTimeout))

		It("copies files in and out with kubectl cp", func(ctx SpecContext) {
			dir := GinkgoT().TempDir()
			in := filepath.Join(dir, "in.txt")
			content := strings.Repeat("copied through tar over exec\n", 1000)
			Expect(os.WriteFile(in, []byte(content), 0o600)).To(Succeed())
			mustKubectl(ctx, "cp", in, ns+"/shell:/tmp/in.txt")
			Expect(mustKubectl(ctx, "exec", "-n", ns, "shell", "--", "md5sum", "/tmp/in.txt")).To(HavePrefix(md5hex(content)))
			back := filepath.Join(dir, "back.txt")
			mustKubectl(ctx, "cp", ns+"/shell:/tmp/in.txt", back)
			got, err := os.ReadFile(back)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(got)).To(Equal(content))
		}, SpecTimeout(3*apiTimeout))
	})

	It("forwards a port with kubectl port-forward", func(ctx SpecContext) {
		startPod(ctx, sh("web", "mkdir -p /www && echo hello-through-port-forward > /www/index.html && exec httpd -f -p 8080 -h /www"))
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cmd, err := apiServer.Kubectl(fctx, "port-forward", "-n", ns, "pod/web", ":8080")
		Expect(err).NotTo(HaveOccurred())
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		Expect(cmd.Start()).To(Succeed())
		defer func() { cancel(); _ = cmd.Wait() }()
		forwarding := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
		var local string
		Eventually(func(g Gomega) {
			m := forwarding.FindStringSubmatch(out.String())
			g.Expect(m).NotTo(BeNil(), out.String())
			local = m[1]
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		for range 2 {
			resp, err := http.Get("http://127.0.0.1:" + local + "/index.html")
			Expect(err).NotTo(HaveOccurred(), out.String())
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			Expect(string(body)).To(Equal("hello-through-port-forward\n"))
		}
	}, SpecTimeout(podStartTimeout+2*apiTimeout))

	It("attaches to a container with a tty", func(ctx SpecContext) {
		pod := utils.BusyboxPod(ns, "tty", nodeAPINode, "sh")
		pod.Spec.Containers[0].TTY = true
		pod.Spec.Containers[0].Stdin = true
		startPod(ctx, pod)
		kubeconfig, err := apiServer.AdminKubeconfig()
		Expect(err).NotTo(HaveOccurred())
		kubectlBin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// script gives kubectl the terminal -t wants.
		cmd := exec.CommandContext(fctx, "script", "-qfec",
			fmt.Sprintf("%s --kubeconfig %s attach -it -n %s tty", kubectlBin, kubeconfig, ns), "/dev/null")
		stdin, err := cmd.StdinPipe()
		Expect(err).NotTo(HaveOccurred())
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		Expect(cmd.Start()).To(Succeed())
		defer func() { cancel(); _ = cmd.Wait() }()
		// The shell computes the answer, so an echo of the input alone does
		// not pass.
		Eventually(func(g Gomega) {
			_, err := io.WriteString(stdin, "echo attached-$((40+2))\r")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.String()).To(ContainSubstring("attached-42"))
		}).WithTimeout(apiTimeout).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(podStartTimeout+2*apiTimeout))

	It("checkpoints a running container with POST /checkpoint, or answers 500 with the runtime's reason", func(ctx SpecContext) {
		startPod(ctx, utils.BusyboxPod(ns, "frozen", nodeAPINode, "sleep", "3600"))
		cs, err := kubernetes.NewForConfig(apiServer.Config)
		Expect(err).NotTo(HaveOccurred())
		post := func(container string) (int, string) {
			body, err := cs.CoreV1().RESTClient().Post().
				AbsPath("/api/v1/nodes", nodeAPINode, "proxy", "checkpoint", ns, "frozen", container).Param("timeout", "30").DoRaw(ctx)
			if status := apierrors.APIStatus(nil); errors.As(err, &status) {
				return int(status.Status().Code), err.Error() + " " + string(body)
			}
			Expect(err).NotTo(HaveOccurred())
			return http.StatusOK, string(body)
		}

		By("a container the pod does not have: 404")
		code, body := post("nope")
		Expect(code).To(Equal(http.StatusNotFound), body)

		By("the running container: the runtime writes the archive, or says why it cannot (CRIU)")
		code, body = post("main")
		switch code {
		case http.StatusOK:
			var resp struct{ Items []string }
			Expect(json.Unmarshal([]byte(body), &resp)).To(Succeed(), body)
			Expect(resp.Items).To(HaveLen(1))
			Expect(filepath.Dir(resp.Items[0])).To(Equal(filepath.Join(nodelet.RootDir, "checkpoints")))
			st, err := os.Stat(resp.Items[0])
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
			Expect(st.Size()).To(BeNumerically(">", 0))
		default:
			Expect(code).To(Equal(http.StatusInternalServerError), body)
			Expect(body).To(ContainSubstring("checkpointing of " + ns + "/frozen/main failed"))
			GinkgoWriter.Printf("the runtime cannot checkpoint here: %s\n", body)
		}
		dir, err := os.Stat(filepath.Join(nodelet.RootDir, "checkpoints"))
		Expect(err).NotTo(HaveOccurred())
		Expect(dir.Mode().Perm()).To(Equal(os.FileMode(0o700)))

		By("the container runs on, never restarted")
		p := utils.GetPod(ctx, admin, ns, "frozen")(Default)
		Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	}, SpecTimeout(podStartTimeout+2*apiTimeout))

	It("serves /stats/summary with every pod's CPU and memory", func(ctx SpecContext) {
		startPod(ctx, utils.BusyboxPod(ns, "stats", nodeAPINode, "sleep", "3600"))
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(admin.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			out, errOut, code := kubectl(ctx, nil, "get", "--raw", "/api/v1/nodes/"+nodeAPINode+"/proxy/stats/summary")
			g.Expect(code).To(BeZero(), errOut)
			var sum statsapi.Summary
			g.Expect(json.Unmarshal([]byte(out), &sum)).To(Succeed())
			g.Expect(sum.Node.NodeName).To(Equal(nodeAPINode))
			g.Expect(sum.Node.CPU.UsageCoreNanoSeconds).NotTo(BeNil())
			g.Expect(sum.Node.Memory.WorkingSetBytes).NotTo(BeNil())
			g.Expect(sum.Node.Fs).NotTo(BeNil())
			byName := map[string]statsapi.PodStats{}
			for _, p := range sum.Pods {
				byName[p.PodRef.Namespace+"/"+p.PodRef.Name] = p
			}
			running := 0
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning {
					continue
				}
				running++
				s, ok := byName[ns+"/"+p.Name]
				g.Expect(ok).To(BeTrue(), "pod %s missing from the summary", p.Name)
				g.Expect(s.PodRef.UID).To(Equal(string(p.UID)))
				g.Expect(s.CPU).NotTo(BeNil(), p.Name)
				g.Expect(s.CPU.UsageCoreNanoSeconds).NotTo(BeNil(), p.Name)
				g.Expect(s.Memory).NotTo(BeNil(), p.Name)
				g.Expect(*s.Memory.WorkingSetBytes).To(BeNumerically(">", 0), p.Name)
				g.Expect(s.Containers).NotTo(BeEmpty(), p.Name)
				g.Expect(s.Network).NotTo(BeNil(), p.Name)
				g.Expect(s.Network.Name).To(Equal("eth0"), p.Name)
				g.Expect(s.EphemeralStorage).NotTo(BeNil(), p.Name)
			}
			g.Expect(byName).To(HaveKey(ns + "/stats"))
			g.Expect(running).To(BeNumerically(">=", 1))
		}).WithTimeout(apiTimeout).WithPolling(time.Second).Should(Succeed())

		out := mustKubectl(ctx, "get", "--raw", "/api/v1/nodes/"+nodeAPINode+"/proxy/metrics/resource")
		Expect(out).To(ContainSubstring(fmt.Sprintf(`container_cpu_usage_seconds_total{container="main",namespace=%q,pod="stats"}`, ns)))
		Expect(out).To(ContainSubstring("node_memory_working_set_bytes "))
	}, SpecTimeout(podStartTimeout+2*apiTimeout))

	It("serves /metrics/cadvisor with the kubelet's container families and labels", func(ctx SpecContext) {
		pod := utils.BusyboxPod(ns, "cadvisor", nodeAPINode, "sh", "-c", "while true; do :; done")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
		startPod(ctx, pod)
		p := utils.GetPod(ctx, admin, ns, "cadvisor")(Default)
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		// The id label is the container's cgroup path, a child of the pod's.
		cgroupOf := regexp.MustCompile(`(?m)^container_spec_cpu_period\{container="main",id="([^"]*)",image="[^"]*",name="` + id + `"`)
		// value returns the value of series in the scrape out.
		value := func(g Gomega, out, series string) float64 {
			for _, line := range strings.Split(out, "\n") {
				if rest, ok := strings.CutPrefix(line, series+" "); ok {
					v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
					g.Expect(err).NotTo(HaveOccurred(), line)
					return v
				}
			}
			g.Expect(out).To(ContainSubstring(series + " "))
			return 0
		}
		Eventually(func(g Gomega) {
			out, errOut, code := kubectl(ctx, nil, "get", "--raw", "/api/v1/nodes/"+nodeAPINode+"/proxy/metrics/cadvisor")
			g.Expect(code).To(BeZero(), errOut)
			g.Expect(out).To(ContainSubstring("container_cpu_usage_seconds_total{container=\"main\",cpu=\"total\""))
			m := cgroupOf.FindStringSubmatch(out)
			g.Expect(m).To(HaveLen(2), "the container's series carry its cgroup as id")
			cgroup := m[1]
			g.Expect(cgroup).To(ContainSubstring("pod" + string(p.UID)))
			podCgroup := cgroup[:strings.LastIndex(cgroup, "/")]
			ctr := fmt.Sprintf(`container="main",id=%q,image=%q,name=%q,namespace=%q,pod="cadvisor"`, cgroup, pod.Spec.Containers[0].Image, id, ns)
			podLabels := fmt.Sprintf(`container="",id=%q,image="",name="",namespace=%q,pod="cadvisor"`, podCgroup, ns)
			podNet := strings.Replace(podLabels, `name=`, `interface="eth0",name=`, 1)
			g.Expect(out).To(ContainSubstring("container_network_receive_bytes_total{" + podNet + "}"))
			g.Expect(value(g, out, "container_network_transmit_packets_total{"+podNet+"}")).To(BeNumerically(">=", 0))
			g.Expect(out).To(ContainSubstring("container_network_receive_packets_dropped_total{" + podNet + "}"))
			cpu := value(g, out, strings.Replace("container_cpu_usage_seconds_total{"+ctr+"}", `id=`, `cpu="total",id=`, 1))
			g.Expect(cpu).To(BeNumerically(">", 0.05), "the busy loop's CPU time")
			ws := value(g, out, "container_memory_working_set_bytes{"+ctr+"}")
			g.Expect(ws).To(And(BeNumerically(">", 0), BeNumerically("<=", 64<<20)))
			g.Expect(value(g, out, "container_spec_memory_limit_bytes{"+ctr+"}")).To(BeNumerically("==", 64<<20))
			g.Expect(value(g, out, "container_spec_cpu_shares{"+ctr+"}")).To(BeNumerically("==", 102))
			g.Expect(value(g, out, "container_spec_cpu_quota{"+ctr+"}")).To(BeNumerically("==", 20000), "200m of a 100ms period")
			g.Expect(value(g, out, "container_spec_cpu_period{"+ctr+"}")).To(BeNumerically("==", 100000))
			// From the cgroup files: the busy loop runs into its 200m quota.
			g.Expect(value(g, out, "container_cpu_cfs_periods_total{"+ctr+"}")).To(BeNumerically(">", 0))
			g.Expect(value(g, out, "container_cpu_cfs_throttled_periods_total{"+ctr+"}")).To(BeNumerically(">", 0))
			g.Expect(value(g, out, "container_cpu_cfs_throttled_seconds_total{"+ctr+"}")).To(BeNumerically(">", 0))
			g.Expect(value(g, out, "container_cpu_user_seconds_total{"+ctr+"}")).To(BeNumerically(">", 0))
			g.Expect(value(g, out, "container_processes{"+ctr+"}")).To(BeNumerically(">=", 1))
			g.Expect(value(g, out, "container_threads{"+ctr+"}")).To(BeNumerically(">=", 1))
			g.Expect(value(g, out, "container_memory_cache{"+ctr+"}")).To(BeNumerically(">=", 0))
			g.Expect(value(g, out, "container_cpu_user_seconds_total{"+podLabels+"}")).To(BeNumerically(">", 0))
			g.Expect(out).To(MatchRegexp(`(?m)^machine_cpu_cores\{boot_id="[^"]+",machine_id="[^"]*",system_uuid="[^"]*"\} [1-9]`))
			g.Expect(out).To(MatchRegexp(`(?m)^machine_memory_bytes\{boot_id="[^"]+",machine_id="[^"]*",system_uuid="[^"]*"\} [1-9]`))
			g.Expect(value(g, out, strings.Replace("container_cpu_usage_seconds_total{"+podLabels+"}", `id=`, `cpu="total",id=`, 1))).To(BeNumerically(">=", cpu))
			start := value(g, out, "container_start_time_seconds{"+ctr+"}")
			g.Expect(start).To(BeNumerically("~", float64(p.CreationTimestamp.Unix()), 120))
		}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(podStartTimeout+2*apiTimeout))

	Describe("straight to its port", func() {
		get := func(ctx context.Context, c *http.Client, path, token string) (int, string) {
			GinkgoHelper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+nodelet.ServerAddr+path, http.NoBody)
			Expect(err).NotTo(HaveOccurred())
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := c.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			return resp.StatusCode, string(body)
		}
		httpsClient := func(certs ...tls.Certificate) *http.Client {
			return &http.Client{Timeout: apiTimeout, Transport: &http.Transport{
				// The serving certificate is self-signed, as the kubelet's
				// is when none is given.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}, //nolint:gosec // test client
			}}
		}
		bindNodeRole := func(ctx context.Context, name, subresource string, subject rbacv1.Subject) {
			GinkgoHelper()
			role := &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/" + subresource}, Verbs: []string{"get"}}},
			}
			Expect(admin.Create(ctx, role)).To(Succeed())
			DeferCleanup(admin.Delete, role)
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{subject},
			}
			Expect(admin.Create(ctx, binding)).To(Succeed())
			DeferCleanup(admin.Delete, binding)
		}

		It("answers 401 without credentials or with a bad token", func(ctx SpecContext) {
			code, _ := get(ctx, httpsClient(), "/pods", "")
			Expect(code).To(Equal(http.StatusUnauthorized))
			code, _ = get(ctx, httpsClient(), "/metrics", "not-a-token")
			Expect(code).To(Equal(http.StatusUnauthorized))
			other, err := utils.NewCA(GinkgoT().TempDir(), "other")
			Expect(err).NotTo(HaveOccurred())
			stranger, err := other.TLSClientCert("stranger", "system:masters")
			Expect(err).NotTo(HaveOccurred())
			code, _ = get(ctx, httpsClient(stranger), "/pods", "")
			Expect(code).To(Equal(http.StatusUnauthorized), "a certificate of another CA")
		}, SpecTimeout(apiTimeout))

		It("answers 403 to a user without nodes/proxy and serves metrics to one with nodes/metrics", func(ctx SpecContext) {
			alice, err := apiServer.KubeletClientCA.TLSClientCert("alice")
			Expect(err).NotTo(HaveOccurred())
			code, body := get(ctx, httpsClient(alice), "/pods", "")
			Expect(code).To(Equal(http.StatusForbidden), body)
			code, _ = get(ctx, httpsClient(alice), "/metrics", "")
			Expect(code).To(Equal(http.StatusForbidden))

			bindNodeRole(ctx, "e2e-metrics-reader", "metrics", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"})
			bob, err := apiServer.KubeletClientCA.TLSClientCert("bob")
			Expect(err).NotTo(HaveOccurred())
			code, body = get(ctx, httpsClient(bob), "/metrics", "")
			Expect(code).To(Equal(http.StatusOK))
			Expect(body).To(ContainSubstring("kubelet_runtime_operations_duration_seconds"))
			// The node's pods and containers, counted from the runtime's
			// lists at the scrape.
			startPod(ctx, utils.BusyboxPod(ns, "counted", nodeAPINode, "sleep", "3600"))
			_, body = get(ctx, httpsClient(bob), "/metrics", "")
			Expect(body).To(MatchRegexp(`(?m)^kubelet_running_pods [1-9]`))
			Expect(body).To(MatchRegexp(`(?m)^kubelet_running_containers\{container_state="running"\} [1-9]`))
			code, _ = get(ctx, httpsClient(bob), "/pods", "")
			Expect(code).To(Equal(http.StatusForbidden), "nodes/metrics is not nodes/proxy")
		}, SpecTimeout(apiTimeout))

		It("authenticates service account tokens with a TokenReview", func(ctx SpecContext) {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}}
			Expect(admin.Create(ctx, sa)).To(Succeed())
			bindNodeRole(ctx, "e2e-stats-reader", "stats", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns})
			cs, err := kubernetes.NewForConfig(apiServer.Config)
			Expect(err).NotTo(HaveOccurred())
			tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scraper",
				&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			code, body := get(ctx, httpsClient(), "/stats/summary", tr.Status.Token)
			Expect(code).To(Equal(http.StatusOK), body)
			Expect(body).To(ContainSubstring(`"nodeName":"` + nodeAPINode + `"`))
			code, _ = get(ctx, httpsClient(), "/pods", tr.Status.Token)
			Expect(code).To(Equal(http.StatusForbidden))
		}, SpecTimeout(apiTimeout))
	})
})

// syncBuffer is a bytes.Buffer safe for a writing process and a reading
// spec.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// md5hex is the hex MD5 of s, as md5sum prints it.
func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// websocketLog reads a container log through the API server over a
// websocket (protocol binary.k8s.io), as the conformance suite and browser
// clients do, with query appended to the request.
func websocketLog(ctx context.Context, ns, pod, query string) (string, error) {
	GinkgoHelper()
	tlsConfig, err := rest.TLSConfigFor(apiServer.Config)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(apiServer.Config.Host)
	if err != nil {
		return "", err
	}
	if u.Host == "" { // a host without a scheme
		u = &url.URL{Host: apiServer.Config.Host}
	}
	u.Scheme, u.Path, u.RawQuery = "wss", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/log", ns, pod), query
	cfg, err := websocket.NewConfig(u.String(), "http://localhost")
	if err != nil {
		return "", err
	}
	cfg.TlsConfig, cfg.Protocol = tlsConfig, []string{"binary.k8s.io"}
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	return readWebSocket(ws, func(msg []byte) []byte { return msg })
}

// readWebSocket reads ws to its end and returns what keep takes of each
// message.
func readWebSocket(ws *websocket.Conn, keep func(msg []byte) []byte) (string, error) {
	var out bytes.Buffer
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			if errors.Is(err, io.EOF) {
				return out.String(), nil
			}
			return out.String(), err
		}
		out.Write(keep(msg))
	}
}
