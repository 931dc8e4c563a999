package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nodelet/nodelet/test/utils"
)

// Configurations that would open the node up, or silently do something
// other than what they say, are refused at start with the field named.
var _ = Describe("Unsafe configurations", func() {
	DescribeTable("are refused at start, naming the field",
		func(ctx SpecContext, config, field string) {
			code, out := runToExit(ctx, "e2e-refused", config)
			Expect(code).To(Equal(2), "output:\n%s", out)
			Expect(out).To(ContainSubstring(field))
		},
		Entry("anonymous requests with AlwaysAllow (anyone could exec into every pod)",
			"server:\n  anonymous:\n    enabled: true\n  authorization:\n    mode: AlwaysAllow\n", "server.anonymous.enabled"),
		Entry("a QPS of 0, which the client would take for 5",
			"kubeAPIQPS: 0\n", "kubeAPIQPS"),
	)
})

// kubeadm's config.yaml starts nodelet; a field it sets that nodelet
// cannot honour is refused by its name, never silently ignored.
var _ = Describe("The kubelet's configuration file", func() {
	run := func(ctx context.Context, config []byte) (int, string) {
		GinkgoHelper()
		bin, err := utils.NodeletBinary(ctx)
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		file := filepath.Join(dir, "config.yaml")
		Expect(os.WriteFile(file, config, 0o600)).To(Succeed())
		runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var out bytes.Buffer
		// A kubeconfig that does not exist and no static pods: a config
		// nodelet accepts fails after it was read, on the kubeconfig.
		cmd := exec.CommandContext(runCtx, bin, "--config", file, "--hostname-override", "e2e-kubeadm",
			"--kubeconfig", filepath.Join(dir, "absent.kubeconfig"), "--root-dir", filepath.Join(dir, "root"),
			"--cert-dir", filepath.Join(dir, "pki"), "--pod-manifest-path", "")
		cmd.Stdout, cmd.Stderr = &out, &out
		err = cmd.Run()
		var exitErr *exec.ExitError
		Expect(errors.As(err, &exitErr)).To(BeTrue(), "nodelet did not fail: %v\n%s", err, out.String())
		return exitErr.ExitCode(), out.String()
	}

	It("accepts the one kubeadm 1.37 writes, and refuses a field nodelet cannot honour by its name", func(ctx SpecContext) {
		kubeadm, err := utils.KubeadmKubeletConfig()
		Expect(err).NotTo(HaveOccurred())
		code, out := run(ctx, kubeadm)
		Expect(code).To(Equal(1), "read, then failed on the absent kubeconfig:\n%s", out)
		Expect(out).To(ContainSubstring("absent.kubeconfig"))

		code, out = run(ctx, append(kubeadm, []byte("cpuManagerPolicy: static\n")...))
		Expect(code).To(Equal(2), "refused as a configuration error:\n%s", out)
		Expect(out).To(ContainSubstring(`"cpuManagerPolicy"`))
	})
})

// On a host where a kubelet runs, nodelet refuses to keep its pods where
// the kubelet would remove them: the kubelet's pod log directory and
// kubepods cgroup, nodelet's defaults too.
var _ = Describe("Beside a running kubelet", func() {
	run := func(ctx context.Context, hostRoot, config string) (int, string) {
		GinkgoHelper()
		return runToExit(ctx, "e2e-beside-refused", "hostRoot: "+hostRoot+"\n"+config)
	}

	It("refuses the kubelet's pod log directory and kubepods cgroup, and starts with paths of its own", func(ctx SpecContext) {
		host := GinkgoT().TempDir()
		sock := filepath.Join(host, "var/lib/kubelet/pod-resources/kubelet.sock")
		Expect(os.MkdirAll(filepath.Dir(sock), 0o755)).To(Succeed())
		l, err := net.Listen("unix", sock)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)

		code, out := run(ctx, host, "")
		Expect(code).To(Equal(1), "output:\n%s", out)
		Expect(out).To(ContainSubstring("a kubelet runs on this host"))
		Expect(out).To(ContainSubstring(`podLogsDir \"/var/log/pods\"`))
		Expect(out).To(ContainSubstring("kubepods cgroup is /kubepods"))

		code, out = run(ctx, host, "podLogsDir: "+filepath.Join(host, "nodelet-pods")+"\ncgroupRoot: "+utils.E2ECgroupParent+"/beside-refused\n")
		Expect(code).To(Equal(1), "output:\n%s", out)
		Expect(out).NotTo(ContainSubstring("a kubelet runs on this host"))
		Expect(out).To(ContainSubstring("absent.kubeconfig"), "went on to read its kubeconfig")
	})
})

// runToExit runs nodelet as node with config (NodeletConfiguration fields)
// and a kubeconfig that does not exist, so that a start that is not refused
// fails on it before anything is made on the host; it returns the exit code
// and the output.
func runToExit(ctx context.Context, node, config string) (int, string) {
	GinkgoHelper()
	bin, err := utils.NodeletBinary(ctx)
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	file := filepath.Join(dir, "nodelet.yaml")
	Expect(os.WriteFile(file, []byte("apiVersion: config.nodelet.io/v1alpha1\nkind: NodeletConfiguration\n"+config), 0o600)).To(Succeed())
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(runCtx, bin, "--config", file, "--node-name", node,
		"--kubeconfig", filepath.Join(dir, "absent.kubeconfig"))
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exitErr *exec.ExitError
	Expect(errors.As(err, &exitErr)).To(BeTrue(), "nodelet did not fail: %v\n%s", err, out.String())
	return exitErr.ExitCode(), out.String()
}
