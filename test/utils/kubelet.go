package utils

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
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

// KubeletOptions describe one real kubelet: the host's agent in specs that
// run nodelet the way a cluster deploys it (as a pod of a kubelet), and
// the reference node of the conformance comparison.
type KubeletOptions struct {
	// NodeName is the Node it registers; it authenticates as
	// system:node:<NodeName> against API.
	NodeName string
	// API is the API server; Containerd the kubelet's runtime.
	API        *APIServer
	Containerd *Containerd
	// Binary is the kubelet to run; empty builds it from the pinned
	// Kubernetes module with hack/kubelet.sh (cached).
	Binary string
	// Config is set over the harness's KubeletConfiguration, key by key
	// at its top level: a map given here replaces the harness's whole.
	Config map[string]any
	// Args are command-line flags added to the harness's.
	Args []string
	// NetNS, when set, is the network namespace (ip netns) the kubelet
	// runs in (nsenter --net; the mount namespace is its own as always,
	// propagating to the host's), as node of a multi-node cluster. NodeIP
	// must then be the namespace's address: its node IP (--node-ip),
	// where its API and /healthz listen, reachable from the host.
	NetNS string
	// MountNS, when set, is the file of a mount namespace (nsenter
	// --mount) the kubelet's own is made from instead of the machine's: a
	// node's (NodeMounts.NSPath).
	MountNS string
	// NodeIP, when set, is the kubelet's --node-ip and the address of its
	// API and /healthz.
	NodeIP net.IP
	// Dir, when set, is the kubelet's directory (it must exist), instead
	// of a new temporary one: a short one keeps the Unix sockets under its
	// root within their 107 bytes.
	Dir string
	// CadvisorRuntime, when set, shows Containerd to the cAdvisor inside
	// the kubelet, which asks containerd about containers at
	// cadvisorContainerdDir/containerd.sock whatever the CRI endpoint is:
	// the directory of Containerd's socket is bind-mounted there in the
	// kubelet's own mount namespace (see IsolatedKubeletCommand). Without
	// it, cAdvisor sees the pods' cgroups only, and serves their series
	// with empty container, pod, namespace and image labels.
	CadvisorRuntime bool
}

// Kubelet is a kubelet process with its root, pod logs, certificates,
// configuration and log under Dir.
type Kubelet struct {
	Options KubeletOptions
	Dir     string
	LogPath string
	// HealthzAddr is its /healthz, on loopback.
	HealthzAddr string
	// ServerAddr is the kubelet API: the configuration's address and port.
	ServerAddr string

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{} // closed when no process runs and none will
	err         error         // how the last process ended
	supervising bool
	stopping    bool
	restarts    int
	// argv is the command line of every process, for Restart.
	argv []string
}

// kubeletStopTimeout is how long the kubelet gets between SIGTERM and SIGKILL.
const kubeletStopTimeout = 20 * time.Second

// StartKubelet starts the kubelet with the settings this machine kind
// needs (cgroup v1 allowed, no QoS cgroups, no node allocatable
// enforcement, no swap check), its own free ports and opts' changes, in a
// mount namespace where the kernel settings it writes are files
// (IsolatedKubeletCommand). It does not wait for the kubelet: callers wait
// for /healthz (WaitHealthy) or the Node, with the timeout they need. On
// error the returned Kubelet, if any, has been stopped.
func StartKubelet(ctx context.Context, opts KubeletOptions) (*Kubelet, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = runHackScript(ctx, "kubelet.sh"); err != nil {
			return nil, fmt.Errorf("building the kubelet: %w", err)
		}
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "nodelet-kubelet-"); err != nil {
			return nil, fmt.Errorf("creating the kubelet directory: %w", err)
		}
	}
	k := &Kubelet{Options: opts, Dir: dir, LogPath: filepath.Join(dir, "kubelet.log")}
	args, err := k.configure()
	if err != nil {
		return k, errors.Join(err, k.Stop())
	}
	var binds []BindMount
	if opts.CadvisorRuntime {
		socket := strings.TrimPrefix(opts.Containerd.Endpoint(), "unix://")
		binds = append(binds, BindMount{Source: filepath.Dir(socket), Target: cadvisorContainerdDir})
	}
	prefix, err := IsolatedKubeletCommand(dir, binds...)
	if err != nil {
		return k, errors.Join(err, k.Stop())
	}
	if opts.NetNS != "" || opts.MountNS != "" {
		// nsenter execs the rest: the pid stays the kubelet's.
		enter := []string{"nsenter"}
		if opts.NetNS != "" {
			enter = append(enter, "--net="+NetNSPath(opts.NetNS))
		}
		if opts.MountNS != "" {
			enter = append(enter, "--mount="+opts.MountNS, "--wdns="+dir)
		}
		prefix = append(enter, prefix...)
	}
	if err := k.start(append(append(prefix, bin), args...)); err != nil {
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
		"authorization":       map[string]any{"mode": "Webhook"},
		"serializeImagePulls": false,
		// The images cannot be pulled again: never collect them.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"staticPodPath":               "",
		// Disk pressure only when the machine is really short, as for the
		// harness's nodelet: with the kubelet's 10% and 15%, a machine
		// whose disk others fill (build caches) evicts and refuses pods.
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
	}
	extraArgs := k.Options.Args
	if ip := k.Options.NodeIP; ip != nil {
		// The namespace's loopback is not the host's: everything the
		// harness reaches listens on the node's address.
		cfg["address"] = ip.String()
		cfg["healthzBindAddress"] = ip.String()
		k.HealthzAddr = net.JoinHostPort(ip.String(), fmt.Sprint(ports[1]))
		extraArgs = append([]string{"--node-ip=" + ip.String()}, extraArgs...)
	}
	maps.Copy(cfg, k.Options.Config)
	k.ServerAddr = net.JoinHostPort(fmt.Sprint(cfg["address"]), fmt.Sprint(cfg["port"]))
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the kubelet configuration: %w", err)
	}
	config := filepath.Join(k.Dir, "config.yaml")
	if err := os.WriteFile(config, data, 0o600); err != nil {
		return nil, fmt.Errorf("writing the kubelet configuration: %w", err)
	}
	return append([]string{
		"--config=" + config,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(k.Dir, "root"),
		"--cert-dir=" + filepath.Join(k.Dir, "pki"),
		"--hostname-override=" + k.Options.NodeName,
		"--v=2",
	}, extraArgs...), nil
}

// start runs argv from a supervisor that, once Supervise was called,
// starts it again a second after it exits.
func (k *Kubelet) start(argv []string) error {
	k.mu.Lock()
	k.argv = argv
	k.mu.Unlock()
	cmd, err := k.run(argv)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	k.mu.Lock()
	k.done = done
	k.mu.Unlock()
	go k.superviseLoop(cmd, argv, done)
	return nil
}

// run starts one kubelet process, its output appended to the log.
func (k *Kubelet) run(argv []string) (*exec.Cmd, error) {
	logf, err := os.OpenFile(k.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the kubelet log: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
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

// superviseLoop waits for each process and starts it again while
// supervision is on; done is closed when it gives up or Terminate was
// called.
func (k *Kubelet) superviseLoop(cmd *exec.Cmd, argv []string, done chan struct{}) {
	defer close(done)
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
		k.restarts++
		k.mu.Unlock()
		if cmd, err = k.run(argv); err != nil {
			k.mu.Lock()
			k.err = err
			k.mu.Unlock()
			return
		}
	}
}

// Supervise turns on starting the kubelet again a second after it exits,
// as systemd does on a node: a node whose kubelet stays down fails every
// spec after the one that crashed it.
func (k *Kubelet) Supervise() {
	k.mu.Lock()
	k.supervising = true
	k.mu.Unlock()
}

// Restarts counts the times the supervisor started the kubelet again.
func (k *Kubelet) Restarts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restarts
}

// Running reports whether a kubelet process is up, or will be again.
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

// WaitHealthy waits up to timeout for /healthz to answer 200, and fails
// at once when the kubelet exits meanwhile.
func (k *Kubelet) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	k.mu.Lock()
	done := k.done
	k.mu.Unlock()
	return healthWait{
		name: "kubelet", url: "http://" + k.HealthzAddr + "/healthz",
		exited: done, exitErr: k.exitErr, logTail: k.LogTail,
	}.wait(ctx, timeout)
}

// exitErr is how the last kubelet process ended.
func (k *Kubelet) exitErr() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// LogTail returns the last n lines of the kubelet's log.
func (k *Kubelet) LogTail(n int) string { return TailLines(k.LogPath, n) }

// Terminate ends supervision and stops the kubelet process (SIGTERM, then
// SIGKILL), leaving its directory and mounts: its pods' volumes stay
// mounted until their containerd has stopped them. Safe to call more
// than once.
func (k *Kubelet) Terminate() {
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
	case <-time.After(kubeletStopTimeout):
		k.mu.Lock()
		cmd = k.cmd
		k.mu.Unlock()
		_ = cmd.Process.Kill()
		<-done
	}
}

// Kill ends the kubelet process with sig (SIGKILL: a crash; SIGKILL after
// kubeletStopTimeout when sig does not end it) and waits for it to be gone,
// leaving its directory and its pods running in the runtime: Restart
// starts it again. Not for a supervised kubelet, whose supervisor would
// start it again itself.
func (k *Kubelet) Kill(sig syscall.Signal) error {
	k.mu.Lock()
	cmd, done, supervising := k.cmd, k.done, k.supervising
	k.mu.Unlock()
	switch {
	case supervising:
		return errors.New("killing the kubelet: its supervisor would start it again")
	case cmd == nil || done == nil:
		return errors.New("killing the kubelet: it was never started")
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(kubeletStopTimeout):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}

// Restart starts the kubelet again after Kill, with the same command line,
// configuration and directory, as a node's service manager would. It does
// not wait for the new process: callers wait for /healthz or the Node.
func (k *Kubelet) Restart() error {
	if k.Running() {
		return errors.New("restarting the kubelet: it is still running")
	}
	k.mu.Lock()
	argv := k.argv
	k.mu.Unlock()
	if argv == nil {
		return errors.New("restarting the kubelet: it was never started")
	}
	return k.start(argv)
}

// Stop terminates the kubelet and removes its directory and the mounts it
// made there (its root directory is a shared bind mount, pod volumes are
// mounted below it). The pods it ran are left to its containerd's Stop,
// which should come first when they may still run. Safe to call more than
// once.
func (k *Kubelet) Stop() error {
	k.Terminate()
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

// SharedRootBind makes a new directory under the temporary directory and
// bind-mounts the machine's / there, alone (none of the mounts below /
// comes along), as a mount of its own with shared propagation: what a pod
// that mounts the host's / with HostToContainer propagation needs as its
// hostPath, since the runtime refuses a source that is neither shared nor
// a slave (systemd makes / shared on real nodes; here it is private). The
// returned function unmounts it and removes the then empty directory; it
// never removes anything recursively.
func SharedRootBind(pattern string) (string, func() error, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, fmt.Errorf("creating a directory for the host's root: %w", err)
	}
	cleanup := func() error {
		// Private first, so that the unmount propagates nowhere.
		_ = unix.Mount("", dir, "", unix.MS_PRIVATE, "")
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmounting the host's root at %s: %w", dir, err)
		}
		return os.Remove(dir)
	}
	if err := unix.Mount("/", dir, "", unix.MS_BIND, ""); err != nil {
		return "", nil, errors.Join(fmt.Errorf("bind-mounting / at %s: %w", dir, err), os.Remove(dir))
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return "", nil, errors.Join(fmt.Errorf("making %s a shared mount: %w", dir, err), cleanup())
	}
	return dir, cleanup, nil
}

// clusterKubeletStartTimeout bounds the wait for a cluster node's kubelet
// to answer /healthz.
const clusterKubeletStartTimeout = 90 * time.Second

// ClusterKubeletPort is the kubelet API's port on a cluster node's address,
// the kubelet's default.
const ClusterKubeletPort = 10250

// ClusterKubelet returns a ClusterOptions.StartAgent that runs the real
// kubelet (binary; built when empty) as each node's agent, in the node's
// network namespace with the node's containerd: registered with a node
// client certificate, its API on the node's address at ClusterKubeletPort
// trusting the API server's kubelet client certificates and allowing what
// they ask, the cluster's DNS settings, the pod CIDR taken from the Node
// as the kubelet does by itself, and config on top. It returns once
// /healthz answers; from then on the kubelet is started again whenever it
// exits.
//
// edit, when given, changes each node's KubeletOptions before the start.
func ClusterKubelet(binary string, config map[string]any, edit ...func(*KubeletOptions)) func(ctx context.Context, c *Cluster, n *ClusterNode) error {
	return func(ctx context.Context, c *Cluster, n *ClusterNode) error {
		cfg := map[string]any{
			"port":          ClusterKubeletPort,
			"clusterDNS":    []string{DefaultDNSIP},
			"clusterDomain": DefaultClusterDomain,
			"resolvConf":    "/etc/resolv.conf",
			"authentication": map[string]any{
				"x509":      map[string]any{"clientCAFile": c.API.KubeletClientCA.CertFile},
				"webhook":   map[string]any{"enabled": false},
				"anonymous": map[string]any{"enabled": false},
			},
			"authorization": map[string]any{"mode": "AlwaysAllow"},
		}
		maps.Copy(cfg, config)
		var mountNS string
		if n.Mounts != nil {
			mountNS = n.Mounts.NSPath
		}
		kopts := KubeletOptions{
			MountNS:    mountNS,
			Binary:     binary,
			NodeName:   n.Name,
			API:        c.API,
			Containerd: n.Containerd,
			Config:     cfg,
			NetNS:      n.Net.Namespace,
			NodeIP:     n.IP,
		}
		for _, e := range edit {
			e(&kopts)
		}
		k, err := StartKubelet(ctx, kopts)
		if k != nil {
			c.mu.Lock()
			n.Kubelet = k
			c.mu.Unlock()
			if rerr := c.Options.Record(ClusterPart{Dirs: []string{k.Dir}}); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		if err != nil {
			return fmt.Errorf("starting the kubelet of node %s: %w", n.Name, err)
		}
		if err := k.WaitHealthy(ctx, clusterKubeletStartTimeout); err != nil {
			return fmt.Errorf("starting the kubelet of node %s: %w", n.Name, err)
		}
		k.Supervise()
		return nil
	}
}
