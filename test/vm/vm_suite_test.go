package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// nodeName is the guest's host name, which nodelet registers as its
	// Node, as the kubelet would.
	nodeName = "nodelet-vm"
	// guestCPUs and guestMemoryMiB size the guest: two vCPUs (emulated,
	// on the host's threads) and room for the eviction spec to fill.
	guestCPUs      = 2
	guestMemoryMiB = 3072
	// podPidsLimit is the guest's podPidsLimit.
	podPidsLimit = 1024
	// evictionThreshold is the guest's hard memory.available threshold.
	evictionThreshold = "512Mi"

	// imageBuildTimeout covers debootstrap and the disk image, the first
	// time (a no-op afterwards).
	imageBuildTimeout = 30 * time.Minute
	// bootTimeout covers the emulated boot until sshd answers (33 s to
	// multi-user with one vCPU on an idle machine).
	bootTimeout = 5 * time.Minute
	// installTimeout covers copying in and starting containerd and
	// nodelet and importing the images under emulation.
	installTimeout = 5 * time.Minute
	// joinTimeout covers the TLS bootstrap and the first Ready.
	joinTimeout = 5 * time.Minute
	// podStartTimeout covers a pod's sandbox and containers under
	// emulation, several times slower than on the host.
	podStartTimeout = 3 * time.Minute
	// adoptionWindow is how long the pods are watched after nodelet
	// restarted, for a container started again.
	adoptionWindow = 45 * time.Second
	// evictionTimeout covers filling the guest's memory under emulation,
	// the eviction manager's next round and the pod's termination.
	evictionTimeout = 5 * time.Minute
	// guestCommandTimeout bounds one command over ssh.
	guestCommandTimeout = 2 * time.Minute
	// apiTimeout covers an API round trip.
	apiTimeout = 30 * time.Second
	// pollInterval is how often Eventually polls the API server.
	pollInterval = time.Second
	// guestPollInterval is how often Eventually runs a command in the
	// guest (each an ssh round trip into the emulated machine).
	guestPollInterval = 3 * time.Second
)

// The suite's shared state, set up once in BeforeSuite.
var (
	api       *utils.APIServer
	admin     client.Client
	clientset *kubernetes.Clientset
	guest     *VM
	// timings are the durations printed at the end of the run.
	timings []string
)

func TestVM(t *testing.T) {
	if os.Getenv("NODELET_E2E_VM") != "1" {
		t.Skip("the VM suite runs with NODELET_E2E_VM=1 (make e2e-vm)")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "nodelet on cgroup v2 and systemd (VM)")
}

// progress prints a "==> " line with the time since start, and keeps it
// for the summary.
func progress(start time.Time, format string, args ...any) {
	line := fmt.Sprintf(format, args...) + fmt.Sprintf(" (%s)", time.Since(start).Round(time.Second))
	timings = append(timings, line)
	fmt.Fprintln(os.Stderr, "==> "+line)
}

// hackScript runs hack/<name> from the repository root with its progress
// on our standard error and returns its output's last line.
func hackScript(ctx context.Context, name string) (string, error) {
	out, err := utils.RunHackScript(ctx, os.Stderr, name)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1], nil
}

var _ = BeforeSuite(func(ctx SpecContext) {
	root, err := utils.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	suiteStart := time.Now()

	start := time.Now()
	Expect(exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "vm", "deps.sh")).Run()).To(Succeed(), "installing qemu and debootstrap")
	imageDir, err := hackScript(ctx, "vm/image.sh")
	Expect(err).NotTo(HaveOccurred())
	progress(start, "base image %s", imageDir)

	start = time.Now()
	runtimeDir, err := hackScript(ctx, "runtime.sh")
	Expect(err).NotTo(HaveOccurred())
	nodelet := filepath.Join(root, "bin", "nodelet")
	if _, err := os.Stat(nodelet); err != nil {
		Fail("no bin/nodelet: make e2e-vm builds it (make build)")
	}
	var archives []string
	for _, image := range []string{utils.PauseImage, utils.BusyboxImage} {
		archive, err := utils.ImageArchive(ctx, image)
		Expect(err).NotTo(HaveOccurred())
		archives = append(archives, archive)
	}
	progress(start, "runtime %s, bin/nodelet and the test images ready", runtimeDir)

	start = time.Now()
	removeLink, err := SetUpHostLink()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(removeLink)
	api = utils.MustStartAPIServerWithOptions(ctx, utils.APIServerOptions{
		BootstrapTokenAuth: true,
		BindAddress:        []byte{10, 253, 0, 1},
	})
	DeferCleanup(api.Stop)
	Expect(api.Config.Host).To(ContainSubstring(APIServerIP))
	utils.MustStartControllerManager(ctx, api, utils.ControllerManagerOptions{})
	admin, err = api.AdminClient()
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(api.Config)
	Expect(err).NotTo(HaveOccurred())
	_, err = api.InstallNodeletAccess(ctx)
	Expect(err).NotTo(HaveOccurred())
	approver, err := utils.StartCSRApprover(ctx, api)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(approver.Stop)
	token, err := api.CreateNodeBootstrapToken(ctx, nodeName, time.Hour)
	Expect(err).NotTo(HaveOccurred())
	progress(start, "control plane on %s with nodelet's CSR approver, bootstrap token for %s", api.Config.Host, nodeName)

	start = time.Now()
	work, err := os.MkdirTemp("", "nodelet-vm-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, work)
	share := filepath.Join(work, "share")
	nodePort, err := FreePort(GuestIP)
	Expect(err).NotTo(HaveOccurred())
	sshPort, err := FreePort("127.0.0.1")
	Expect(err).NotTo(HaveOccurred())
	config, err := KubeletConfig(NodeConfig{Port: nodePort, PodPidsLimit: podPidsLimit, EvictionMemoryAvailable: evictionThreshold})
	Expect(err).NotTo(HaveOccurred())
	files := map[string]string{
		"nodelet":                     nodelet,
		"node/bootstrap-kubelet.conf": token.Kubeconfig,
		"node/ca.crt":                 api.KubeletClientCA.CertFile,
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		files["runtime/"+b] = filepath.Join(runtimeDir, b)
	}
	for i, a := range archives {
		files[fmt.Sprintf("images/%d-%s", i, filepath.Base(a))] = a
	}
	for _, dir := range []struct{ from, to string }{{"hack/vm/node", "files"}, {"config/host", "host"}} {
		entries, err := os.ReadDir(filepath.Join(root, dir.from))
		Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			files[dir.to+"/"+e.Name()] = filepath.Join(root, dir.from, e.Name())
		}
	}
	for to, from := range files {
		Expect(copyFile(from, filepath.Join(share, to))).To(Succeed())
	}
	Expect(os.WriteFile(filepath.Join(share, "node", "config.yaml"), config, 0o644)).To(Succeed())

	opts := Options{
		ImageDir: imageDir, WorkDir: filepath.Join(work, "vm"), ShareDir: share,
		CPUs: guestCPUs, MemoryMiB: guestMemoryMiB, SSHPort: sshPort, NodeAPIPort: nodePort,
	}
	guest, err = Boot(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() || os.Getenv("NODELET_E2E_VM_KEEP") != "" {
			fmt.Fprintf(os.Stderr, "guest console (%s), last lines:\n%s\n", opts.ConsoleLog(), utils.TailLines(opts.ConsoleLog(), 40))
		}
		_ = guest.Stop()
	})
	bootCtx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	Expect(guest.WaitSSH(bootCtx)).To(Succeed(), "console:\n%s", utils.TailLines(opts.ConsoleLog(), 40))
	progress(start, "guest booted (qemu -accel tcg, %d vCPUs, %d MiB), sshd answers", guestCPUs, guestMemoryMiB)

	start = time.Now()
	installCtx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	out, err := guest.Run(installCtx, "mountpoint -q /mnt/host || mount -t 9p -o trans=virtio,version=9p2000.L,ro "+shareTag+" /mnt/host; bash /mnt/host/files/install.sh 2>&1")
	Expect(err).NotTo(HaveOccurred(), "install.sh: %s", out)
	progress(start, "containerd, runc and nodelet installed, nodelet.service started")
	progress(suiteStart, "set up")
}, NodeTimeout(imageBuildTimeout+bootTimeout+installTimeout+5*time.Minute))

var _ = AfterSuite(func() {
	fmt.Fprintln(os.Stderr, "==> timings:")
	for _, t := range timings {
		fmt.Fprintln(os.Stderr, "    "+t)
	}
})

// copyFile hard-links from at to (the share is read-only to the guest, and
// the cache and the temporary directory are usually on one file system),
// or copies it.
func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := os.Link(from, to); err == nil {
		return nil
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// inGuest runs script in the guest and returns its trimmed output.
func inGuest(ctx context.Context, script string) (string, error) {
	runCtx, cancel := context.WithTimeout(ctx, guestCommandTimeout)
	defer cancel()
	out, err := guest.Run(runCtx, script)
	return strings.TrimSpace(out), err
}

// mustInGuest is inGuest that fails the spec on an error.
func mustInGuest(ctx context.Context, script string) string {
	GinkgoHelper()
	out, err := inGuest(ctx, script)
	Expect(err).NotTo(HaveOccurred(), "in the guest: %s", script)
	return out
}
