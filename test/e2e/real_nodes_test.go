package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/test/utils"
)

// The kubelet configuration and flags of real node images, as
// internal/options/testdata/nodes keeps them (each with where it came
// from), run as they are but for what ties them to their machine: the
// harness's paths, ports, node name, runtime and cgroup driver replace
// theirs (as a node image's own values would be its machine's), and what
// this test machine cannot be (a serving certificate only a cluster's
// signer issues, the kernel settings of protectKernelDefaults, files of
// the image's) is left out. Each runs a pod whose logs and exec work
// through the API server.
var _ = Describe("Real nodes' kubelet configurations", func() {
	// harnessFlags are the distributions' flags the harness sets itself.
	harnessFlags := map[string]bool{
		"kubeconfig": true, "bootstrap-kubeconfig": true, "config": true, "config-dir": true, "cert-dir": true,
		"hostname-override": true, "node-ip": true, "container-runtime-endpoint": true, "cgroup-driver": true,
		"root-dir": true, "read-only-port": true,
		"image-credential-provider-config": true, "image-credential-provider-bin-dir": true,
	}
	// machineFields are the configuration fields left out: files of the
	// node image, a certificate the cluster's signer issues, the image's
	// kernel settings.
	machineFields := []string{"staticPodPath", "resolvConf", "tlsCertFile", "tlsPrivateKeyFile", "serverTLSBootstrap", "protectKernelDefaults"}

	// adjust reads a KubeletConfiguration (YAML or JSON) and leaves out
	// machineFields.
	adjust := func(path string) []byte {
		GinkgoHelper()
		data, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		var m map[string]any
		Expect(yaml.Unmarshal(data, &m)).To(Succeed())
		for _, f := range machineFields {
			delete(m, f)
		}
		out, err := yaml.Marshal(m)
		Expect(err).NotTo(HaveOccurred())
		return out
	}
	// flags reads a distribution's flags, one a line ("--name=value" or
	// "--name value"), without harnessFlags.
	flags := func(path string) []string {
		GinkgoHelper()
		f, err := os.Open(path)
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		var out []string
		for sc := bufio.NewScanner(f); sc.Scan(); {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			name, _, _ := strings.Cut(strings.TrimPrefix(fields[0], "--"), "=")
			if harnessFlags[name] {
				continue
			}
			out = append(out, fields...)
		}
		return out
	}

	run := func(ctx SpecContext, name, config, configDir string, check func(ctx SpecContext, n *utils.Nodelet)) {
		root, err := utils.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		src := filepath.Join(root, "internal", "options", "testdata", "nodes", name)
		node := "e2e-real-" + name
		kubeletConfig := []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
		if config != "" {
			kubeletConfig = adjust(filepath.Join(src, config))
		}
		args := flags(filepath.Join(src, "flags"))
		if configDir != "" {
			dir := GinkgoT().TempDir()
			entries, err := os.ReadDir(filepath.Join(src, configDir))
			Expect(err).NotTo(HaveOccurred())
			for _, e := range entries {
				Expect(os.WriteFile(filepath.Join(dir, e.Name()), adjust(filepath.Join(src, configDir, e.Name())), 0o600)).To(Succeed())
			}
			args = append(args, "--config-dir="+dir)
		}
		readOnly := freePort()
		args = append(args, fmt.Sprintf("--read-only-port=%d", readOnly))

		admin, err := apiServer.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		// A configuration with shutdownGracePeriod (EKS's) would have
		// nodelet take a shutdown inhibitor lock from this machine's logind:
		// no system bus for it, which nodelet logs and runs on without.
		noBus := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(GinkgoT().TempDir(), "no-bus")
		n, err := utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd,
			KubeletConfig: kubeletConfig, Args: args, Env: []string{noBus}})
		if n != nil {
			DeferCleanup(n.Cleanup)
		}
		Expect(err).NotTo(HaveOccurred(), "starting nodelet with the %s configuration and flags %q", name, args)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				GinkgoWriter.Printf("nodelet log (%s):\n%s\n", n.LogPath, n.LogTail(150))
			}
		})

		ns := utils.NewNamespace(ctx, admin)
		pod := utils.BusyboxPod(ns, "app", node, "sh", "-c", "echo hello from "+name+"; sleep 3600")
		Expect(admin.Create(ctx, pod)).To(Succeed())
		utils.WaitForPod(ctx, admin, ns, "app", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})

		By("reading the pod's log and running a command in it with kubectl")
		Eventually(func(g Gomega) {
			out, errOut, err := kubectlRun(ctx, "logs", "-n", ns, "app")
			g.Expect(err).NotTo(HaveOccurred(), "kubectl logs: %s", errOut)
			g.Expect(out).To(ContainSubstring("hello from " + name))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		out, errOut, err := kubectlRun(ctx, "exec", "-n", ns, "app", "--", "echo", "exec on "+name)
		Expect(err).NotTo(HaveOccurred(), "kubectl exec: %s", errOut)
		Expect(out).To(Equal("exec on " + name + "\n"))

		By("reading the node's pods on its read-only port, without credentials")
		ip, _, err := net.SplitHostPort(n.ServerAddr)
		Expect(err).NotTo(HaveOccurred())
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(fmt.Sprintf("http://%s/pods", net.JoinHostPort(ip, fmt.Sprint(readOnly))))
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(string(body)).To(ContainSubstring(`"name":"app"`))

		if check != nil {
			check(ctx, n)
		}
	}

	It("runs a pod on EKS AL2023's (nodeadm)", func(ctx SpecContext) {
		run(ctx, "eks-al2023", "config.json", "config.json.d", func(ctx SpecContext, n *utils.Nodelet) {
			Expect(n.LogTail(400)).To(ContainSubstring("Unable to watch the node for shutdown events"),
				"shutdownGracePeriod is honoured: nodelet looked for logind")
		})
	}, SpecTimeout(2*podStartTimeout+2*apiTimeout))

	It("runs a pod on GCE's (kube-up)", func(ctx SpecContext) {
		run(ctx, "gce-kube-up", "config.yaml", "", nil)
	}, SpecTimeout(2*podStartTimeout+2*apiTimeout))

	It("runs a pod on AKS's (AgentBaker)", func(ctx SpecContext) {
		run(ctx, "aks-ubuntu", "config.json", "", nil)
	}, SpecTimeout(2*podStartTimeout+2*apiTimeout))

	It("runs a pod on k3s's, which is all drop-in and flags", func(ctx SpecContext) {
		run(ctx, "k3s", "", "kubelet.conf.d", nil)
	}, SpecTimeout(2*podStartTimeout+2*apiTimeout))
})

// kubectlRun runs the envtest-built kubectl as the admin.
func kubectlRun(ctx context.Context, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd, err := apiServer.Kubectl(ctx, args...)
	if err != nil {
		return "", "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
		err = fmt.Errorf("kubectl %v: exit %d", args, exitErr.ExitCode())
	}
	return stdout.String(), stderr.String(), err
}

// freePort is a TCP port free on this machine now.
func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
