package utils

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"
)

// KubeletOptions describe one real kubelet, the host's agent in specs that
// run nodelet the way a cluster deploys it: as a pod of a kubelet.
type KubeletOptions struct {
	// NodeName is the Node it registers; it authenticates as
	// system:node:<NodeName> against API.
	NodeName string
	// API is the API server; Containerd the kubelet's runtime.
	API        *APIServer
	Containerd *Containerd
}

// Kubelet is a kubelet process built from the pinned Kubernetes module
// (hack/kubelet.sh), with its root, pod logs, certificates and
// configuration under Dir.
type Kubelet struct {
	Options KubeletOptions
	Dir     string
	LogPath string
	// HealthzAddr is its /healthz, on loopback.
	HealthzAddr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// kubeletStopTimeout is how long the kubelet gets between SIGTERM and SIGKILL.
const kubeletStopTimeout = 10 * time.Second

// StartKubelet builds the kubelet when it is not cached and starts it with
// the settings this machine kind needs (cgroup v1 allowed, no QoS cgroups,
// no node allocatable enforcement) and its own free ports. It does not wait
// for the Node: callers do, with the timeout they need.
func StartKubelet(ctx context.Context, opts KubeletOptions) (*Kubelet, error) {
	bin, err := runHackScript(ctx, "kubelet.sh")
	if err != nil {
		return nil, fmt.Errorf("building the kubelet: %w", err)
	}
	dir, err := os.MkdirTemp("", "nodelet-kubelet-")
	if err != nil {
		return nil, fmt.Errorf("creating the kubelet directory: %w", err)
	}
	k := &Kubelet{Options: opts, Dir: dir, LogPath: filepath.Join(dir, "kubelet.log")}
	args, err := k.configure()
	if err != nil {
		return k, errors.Join(err, k.Stop())
	}
	prefix, err := IsolatedKubeletCommand(dir)
	if err != nil {
		return k, errors.Join(err, k.Stop())
	}
	if err := k.start(prefix[0], append(append(prefix[1:], bin), args...)); err != nil {
		return k, errors.Join(err, k.Stop())
	}
	return k, nil
}

// configure writes the kubeconfig and KubeletConfiguration and returns the
// command line.
func (k *Kubelet) configure() ([]string, error) {
	for _, d := range []string{"root", "pod-logs", "pki"} {
		if err := os.MkdirAll(filepath.Join(k.Dir, d), 0o750); err != nil {
			return nil, fmt.Errorf("creating kubelet directory %s: %w", d, err)
		}
	}
	userCfg, err := k.Options.API.NodeUserConfig(k.Options.NodeName)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(k.Dir, "kubeconfig")
	if err := WriteKubeconfig(kubeconfig, userCfg, "system:node:"+k.Options.NodeName); err != nil {
		return nil, err
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	k.HealthzAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"containerRuntimeEndpoint": k.Options.Containerd.Endpoint(),
		"address":                  "127.0.0.1",
		"port":                     ports[0],
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              ports[1],
		"podLogsDir":               filepath.Join(k.Dir, "pod-logs"),
		"cgroupDriver":             "cgroupfs",
		// This machine kind: cgroup v1, and no cgroup hierarchy of the
		// kubelet's own.
		"failCgroupV1":           false,
		"cgroupsPerQOS":          false,
		"enforceNodeAllocatable": []string{},
		"failSwapOn":             false,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
		},
		"authorization":               map[string]any{"mode": "Webhook"},
		"serializeImagePulls":         false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"staticPodPath":               "",
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the kubelet configuration: %w", err)
	}
	config := filepath.Join(k.Dir, "config.yaml")
	if err := os.WriteFile(config, data, 0o600); err != nil {
		return nil, fmt.Errorf("writing the kubelet configuration: %w", err)
	}
	return []string{
		"--config=" + config,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(k.Dir, "root"),
		"--cert-dir=" + filepath.Join(k.Dir, "pki"),
		"--hostname-override=" + k.Options.NodeName,
		"--v=2",
	}, nil
}

func (k *Kubelet) start(bin string, args []string) error {
	logf, err := os.OpenFile(k.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the kubelet log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting the kubelet: %w", err)
	}
	done := make(chan struct{})
	k.mu.Lock()
	k.cmd, k.done = cmd, done
	k.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	return nil
}

// Running reports whether the kubelet process is up.
func (k *Kubelet) Running() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done == nil {
		return false
	}
	select {
	case <-k.done:
		return false
	default:
		return true
	}
}

// LogTail returns the last n lines of the kubelet's log.
func (k *Kubelet) LogTail(n int) string {
	b, err := os.ReadFile(k.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", k.LogPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops the kubelet (SIGTERM, then SIGKILL) and removes its directory
// and the mounts it made there (its root directory is a shared bind mount,
// pod volumes are mounted below it). The pods it ran are left to its
// containerd's Stop. Safe to call more than once.
func (k *Kubelet) Stop() error {
	k.mu.Lock()
	cmd, done := k.cmd, k.done
	k.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(kubeletStopTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if k.Dir == "" {
		return nil
	}
	if err := unmountUnder(k.Dir); err != nil {
		return fmt.Errorf("unmounting under the kubelet directory: %w", err)
	}
	if err := os.RemoveAll(k.Dir); err != nil {
		return fmt.Errorf("removing the kubelet directory: %w", err)
	}
	return nil
}

// SharedDir makes a new directory under the temporary directory that is a
// mount point of its own with shared propagation, as a host path a pod
// mounts with Bidirectional propagation must be (systemd makes / shared on
// real nodes; here it is private). The returned function unmounts
// everything below it and removes it.
func SharedDir(pattern string) (string, func() error, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, fmt.Errorf("creating a shared directory: %w", err)
	}
	cleanup := func() error {
		if err := unmountUnder(dir); err != nil {
			return err
		}
		return os.RemoveAll(dir)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return "", nil, errors.Join(fmt.Errorf("bind-mounting %s: %w", dir, err), cleanup())
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return "", nil, errors.Join(fmt.Errorf("making %s a shared mount: %w", dir, err), cleanup())
	}
	return dir, cleanup, nil
}
