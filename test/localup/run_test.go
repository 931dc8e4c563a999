package localup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

// readyLine is what localup prints once the demo is up.
const readyLine = "==> the cluster is ready"

// localupRun is one run of the localup binary with its own state
// directory, as make run starts it.
type localupRun struct {
	bin, stateDir string
	cmd           *exec.Cmd
	out           *syncBuffer
	done          chan struct{}
	err           error
}

// recordedState is the part of localup's state file a test checks.
type recordedState struct {
	PID         int               `json:"pid"`
	Dirs        []string          `json:"dirs"`
	Containerd  containerdState   `json:"containerd"`
	Containerds []containerdState `json:"containerds"`
	Networks    []int             `json:"networks"`
}

type containerdState struct {
	Dir    string `json:"dir"`
	Bridge string `json:"bridge"`
}

// buildLocalup builds hack/localup into dir, as make run does.
func buildLocalup(ctx context.Context, dir string) string {
	GinkgoHelper()
	root, err := utils.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	bin := filepath.Join(dir, "nodelet-localup")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./hack/localup")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building hack/localup: %s", out)
	return bin
}

// startLocalup starts a run, with env added to its environment, and
// waits until it prints readyLine.
func startLocalup(ctx context.Context, bin, stateDir string, env ...string) *localupRun {
	GinkgoHelper()
	r := &localupRun{bin: bin, stateDir: stateDir, out: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin)
	r.cmd.Env = append(append(os.Environ(), "LOCALUP_DIR="+stateDir, "RUN_FOR=30m"), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(r.cmd.Start()).To(Succeed())
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	DeferCleanup(r.cleanUp)
	Eventually(func(g Gomega) {
		if r.exited() {
			// No use waiting for a process that is gone.
			StopTrying("localup exited before it was ready:\n" + r.out.String()).Now()
		}
		g.Expect(r.out.String()).To(ContainSubstring(readyLine))
	}).WithContext(ctx).WithTimeout(readyTimeout).WithPolling(pollInterval).Should(Succeed())
	return r
}

func (r *localupRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// state reads the state file the run keeps.
func (r *localupRun) state() recordedState {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(r.stateDir, "state.json"))
	Expect(err).NotTo(HaveOccurred())
	var st recordedState
	Expect(json.Unmarshal(data, &st)).To(Succeed())
	Expect(st.Dirs).NotTo(BeEmpty())
	Expect(st.containerds()).NotTo(BeEmpty())
	return st
}

// containerds are the run's containerds: its one, or its nodes'.
func (st recordedState) containerds() []containerdState {
	if st.Containerd.Dir != "" {
		return append([]containerdState{st.Containerd}, st.Containerds...)
	}
	return st.Containerds
}

func (r *localupRun) kubeconfig() string { return filepath.Join(r.stateDir, "admin.kubeconfig") }

// adminClient is a client of the run's cluster with its admin kubeconfig.
func (r *localupRun) adminClient() client.Client {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", r.kubeconfig())
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// kubectl runs the envtest-built kubectl on the run's cluster.
func (r *localupRun) kubectl(ctx context.Context, args ...string) (string, error) {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", r.kubeconfig()}, args...)...).CombinedOutput()
	return string(out), err
}

// down runs `localup down` on the run's state directory, as make run-down.
func (r *localupRun) down(ctx context.Context) string {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, r.bin, "down")
	cmd.Env = append(os.Environ(), "LOCALUP_DIR="+r.stateDir)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "localup down: %s", out)
	return string(out)
}

// cleanUp makes sure nothing of the run is left when a spec failed
// half-way: the process is killed and the state directory cleaned.
func (r *localupRun) cleanUp(ctx context.Context) {
	if !r.exited() {
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	if CurrentSpecReport().Failed() {
		GinkgoWriter.Printf("localup output:\n%s\n", r.out.String())
	}
	cmd := exec.CommandContext(ctx, r.bin, "down")
	cmd.Env = append(os.Environ(), "LOCALUP_DIR="+r.stateDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		GinkgoWriter.Printf("localup down: %v\n%s\n", err, out)
	}
}

// expectNothingLeft checks that no process, mount, network device or
// directory of the recorded state is left.
func expectNothingLeft(st recordedState, stateDir string) {
	GinkgoHelper()
	dirs := append([]string{}, st.Dirs...)
	for _, c := range st.containerds() {
		dirs = append(dirs, c.Dir)
	}
	pids, err := utils.ProcessesUnder(dirs...)
	Expect(err).NotTo(HaveOccurred())
	Expect(pids).To(BeEmpty(), "processes of the run")
	for _, d := range dirs {
		mounts, err := utils.MountsUnder(d)
		Expect(err).NotTo(HaveOccurred())
		Expect(mounts).To(BeEmpty(), "mounts under %s", d)
		Expect(d).NotTo(BeAnExistingFile())
	}
	for _, c := range st.containerds() {
		_, err = net.InterfaceByName(c.Bridge)
		Expect(err).To(HaveOccurred(), "bridge %s is still there", c.Bridge)
	}
	for _, n := range st.Networks {
		bridge := fmt.Sprintf("nlnet%d", n)
		_, err = net.InterfaceByName(bridge)
		Expect(err).To(HaveOccurred(), "node network bridge %s is still there", bridge)
		namespaces, err := filepath.Glob("/run/netns/" + bridge + "-*")
		Expect(err).NotTo(HaveOccurred())
		Expect(namespaces).To(BeEmpty(), "node namespaces are still there")
	}
	Expect(filepath.Join(stateDir, "state.json")).NotTo(BeAnExistingFile())
	Expect(filepath.Join(stateDir, "admin.kubeconfig")).NotTo(BeAnExistingFile())
}

// syncBuffer is a bytes.Buffer safe for a writer and readers at once.
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

// lines returns the lines of s that contain substr.
func lines(s, substr string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}
