package conformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/test/utils"
)

// KubeletOptions describe one run of the real kubelet.
type KubeletOptions struct {
	// Binary is the kubelet built by hack/conformance.sh.
	Binary string
	// NodeName is the node it registers; it authenticates as
	// system:node:<NodeName> with a client certificate signed by the API
	// server's client CA, as nodelet does in the harness.
	NodeName   string
	API        *utils.APIServer
	Containerd *utils.Containerd
}

// Kubelet is a kubelet process with its root, certificates, config and log
// under Dir.
type Kubelet struct {
	Dir     string
	LogPath string
	// ServerAddr is the kubelet API on the Node's InternalIP.
	ServerAddr string

	// Restarts counts the times the supervisor started it again.
	Restarts int

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{} // closed when no process runs and none will
	err         error
	supervising bool
	stopping    bool
}

// kubeletStartTimeout bounds the wait for the kubelet's /healthz.
const kubeletStartTimeout = 90 * time.Second

// StartKubelet writes the kubelet's kubeconfig and configuration (this
// machine kind: cgroup v1 allowed, no QoS cgroups, no node allocatable
// enforcement, no swap check) and starts it, returning once /healthz
// answers.
func StartKubelet(ctx context.Context, opts KubeletOptions) (*Kubelet, error) {
	dir, err := os.MkdirTemp("", "nodelet-kubelet-")
	if err != nil {
		return nil, fmt.Errorf("creating the kubelet directory: %w", err)
	}
	k := &Kubelet{Dir: dir, LogPath: filepath.Join(dir, "kubelet.log")}
	args, healthz, err := k.writeFiles(opts)
	if err != nil {
		return nil, errors.Join(err, k.Cleanup())
	}
	prefix, err := utils.IsolatedKubeletCommand(k.Dir)
	if err != nil {
		return nil, errors.Join(err, k.Cleanup())
	}
	if err := k.start(prefix[len(prefix)-1], append([]string{opts.Binary}, args...)); err != nil {
		return nil, errors.Join(err, k.Cleanup())
	}
	if err := k.waitHealthy(ctx, healthz); err != nil {
		return nil, errors.Join(err, k.Cleanup())
	}
	k.Supervise()
	return k, nil
}

// writeFiles writes the kubeconfig and config file and returns the flags
// and the health URL.
func (k *Kubelet) writeFiles(opts KubeletOptions) ([]string, string, error) {
	restCfg, err := opts.API.NodeUserConfig(opts.NodeName)
	if err != nil {
		return nil, "", err
	}
	kubeconfig := filepath.Join(k.Dir, "kubeconfig")
	if err := utils.WriteKubeconfig(kubeconfig, restCfg, "system:node:"+opts.NodeName); err != nil {
		return nil, "", err
	}
	nodeIP, err := opts.Containerd.HostIP()
	if err != nil {
		return nil, "", err
	}
	port := KubeletPort
	healthzPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	k.ServerAddr = net.JoinHostPort(nodeIP.String(), strconv.Itoa(port))
	cfg := kubeletConfig(opts, k.Dir, nodeIP.String(), port, healthzPort)
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("encoding the kubelet config: %w", err)
	}
	configPath := filepath.Join(k.Dir, "config.yaml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		return nil, "", fmt.Errorf("writing the kubelet config: %w", err)
	}
	args := []string{
		"--config=" + configPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(k.Dir, "root"),
		"--cert-dir=" + filepath.Join(k.Dir, "pki"),
		"--hostname-override=" + opts.NodeName,
		"--node-ip=" + nodeIP.String(),
		"--v=2",
	}
	return args, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort), nil
}

// kubeletConfig is the KubeletConfiguration of a node in this harness.
func kubeletConfig(opts KubeletOptions, dir, nodeIP string, port, healthzPort int) map[string]any {
	return map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"containerRuntimeEndpoint": opts.Containerd.Endpoint(),
		"address":                  nodeIP,
		"port":                     port,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              healthzPort,
		"authentication": map[string]any{
			"x509":      map[string]any{"clientCAFile": opts.API.KubeletClientCA.CertFile},
			"webhook":   map[string]any{"enabled": false},
			"anonymous": map[string]any{"enabled": false},
		},
		"authorization": map[string]any{"mode": "AlwaysAllow"},
		// This machine kind: cgroup v1, no systemd, a shared host.
		"failCgroupV1":           false,
		"cgroupsPerQOS":          false,
		"enforceNodeAllocatable": []string{},
		"cgroupDriver":           "cgroupfs",
		"failSwapOn":             false,
		"podLogsDir":             filepath.Join(dir, "pod-logs"),
		"resolvConf":             "/etc/resolv.conf",
		"serializeImagePulls":    false,
		// The images cannot be pulled again: never collect them, and evict
		// only when the machine is really short.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
	}
}

// start runs wrapper with args in a new mount namespace whose mounts keep
// their propagation (the shared kubelet directory stays shared), from a
// supervisor that, once Supervise was called, starts it again a second
// after it exits, as systemd does on a node: in this configuration (no
// QoS cgroups) the kubelet crashes on some in-place resizes, and a node
// whose kubelet stays down would fail every spec after that one.
func (k *Kubelet) start(wrapper string, args []string) error {
	argv := append([]string{"--mount", "--propagation", "unchanged", "--", wrapper}, args...)
	cmd, err := k.run(argv)
	if err != nil {
		return err
	}
	k.done = make(chan struct{})
	go k.superviseLoop(cmd, argv)
	return nil
}

// run starts one kubelet process, its output appended to the log.
func (k *Kubelet) run(argv []string) (*exec.Cmd, error) {
	logf, err := os.OpenFile(k.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the kubelet log: %w", err)
	}
	cmd := exec.Command("unshare", argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	_ = logf.Close() // the child holds its own descriptor
	if err != nil {
		return nil, fmt.Errorf("starting the kubelet: %w", err)
	}
	k.mu.Lock()
	k.cmd = cmd
	k.mu.Unlock()
	return cmd, nil
}

// superviseLoop waits for each process and restarts it while supervision
// is on; done is closed when it gives up or Stop was called.
func (k *Kubelet) superviseLoop(cmd *exec.Cmd, argv []string) {
	defer close(k.done)
	for {
		err := cmd.Wait()
		k.mu.Lock()
		k.err = err
		again := k.supervising && !k.stopping
		k.mu.Unlock()
		if !again {
			return
		}
		time.Sleep(time.Second)
		k.mu.Lock()
		if k.stopping {
			k.mu.Unlock()
			return
		}
		k.Restarts++
		k.mu.Unlock()
		if cmd, err = k.run(argv); err != nil {
			k.mu.Lock()
			k.err = err
			k.mu.Unlock()
			return
		}
	}
}

// Supervise turns on restarting the kubelet when it exits.
func (k *Kubelet) Supervise() {
	k.mu.Lock()
	k.supervising = true
	k.mu.Unlock()
}

func (k *Kubelet) waitHealthy(ctx context.Context, url string) error {
	deadline := time.Now().Add(kubeletStartTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-k.done:
			k.mu.Lock()
			err := k.err
			k.mu.Unlock()
			return fmt.Errorf("kubelet exited during start-up (%w); log:\n%s", err, k.LogTail(40))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return fmt.Errorf("checking kubelet health: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("kubelet did not become healthy in %s; log:\n%s", kubeletStartTimeout, k.LogTail(40))
}

// Stop ends supervision and sends SIGTERM, then SIGKILL after 20
// seconds. Safe to call twice.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	k.stopping = true
	cmd, done := k.cmd, k.done
	k.mu.Unlock()
	if cmd == nil || done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		k.mu.Lock()
		cmd = k.cmd
		k.mu.Unlock()
		_ = cmd.Process.Kill()
		<-done
	}
}

// Cleanup stops the kubelet, unmounts what it left mounted under its
// directory (its root is a shared bind mount of itself, volumes are tmpfs)
// and removes the directory. Pods must be gone first (their containerd
// stopped), or the unmounts pull volumes from under running containers.
func (k *Kubelet) Cleanup() error {
	k.Stop()
	if err := unmountUnder(k.Dir); err != nil {
		return err
	}
	if err := os.RemoveAll(k.Dir); err != nil {
		return fmt.Errorf("removing the kubelet directory: %w", err)
	}
	return nil
}

// LogTail returns the last lines of the kubelet's log.
func (k *Kubelet) LogTail(lines int) string {
	data, err := os.ReadFile(k.LogPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// unmountUnder detaches every mount at or below dir, deepest first, a few
// rounds (a bind mount may reveal another beneath it).
func unmountUnder(dir string) error {
	for range 5 {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounts[i], unix.MNT_DETACH)
		}
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("mounts left under %s: %v", dir, mounts)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	return mounts, nil
}

// freePort asks the kernel for a free TCP port on loopback.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
