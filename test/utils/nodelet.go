package utils

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// NodeletOptions describe one nodelet process.
type NodeletOptions struct {
	// NodeName is the node the agent runs; it authenticates as
	// system:node:<NodeName> against API.
	NodeName string
	// API is the API server; Containerd the runtime. API may be nil when
	// BootstrapKubeconfig names an API server of another kind.
	API        *APIServer
	Containerd *Containerd
	// Config holds NodeletConfiguration fields on top of the ones the
	// harness sets (nodeName, endpoints, directories, bind addresses).
	Config map[string]any
	// Args are extra command-line flags.
	Args []string
	// Dir holds the agent's root, logs, config and kubeconfig; a new temp
	// directory when empty. Reuse it to restart an agent on its state.
	Dir string
	// BootstrapKubeconfig, when set, is the agent's only credential
	// (--bootstrap-kubeconfig, e.g. BootstrapToken.Kubeconfig): no node
	// user is provisioned, and the agent writes Dir/kubeconfig itself
	// once its client certificate is issued.
	BootstrapKubeconfig string
	// Binary is the nodelet binary to run instead of the one built from
	// this repository: one built from a module that extends nodelet
	// through pkg/nodelet (see BuildGoBinary). Restart runs it too.
	Binary string
	// Env is added to the agent's environment (KEY=value), after the
	// test process's own, so it overrides a variable of the same name.
	Env []string
	// APIServerURL and APIServerCA, when set, replace the API server's
	// address and serving CA (PEM) in the agent's kubeconfig: a proxy in
	// front of API that forwards with the node's own credentials.
	APIServerURL string
	APIServerCA  []byte
	// KubeletConfig, when set, is the agent's --config, a kubelet
	// KubeletConfiguration (kubeadm's config.yaml), written as it is: what
	// the harness sets (and Config, which must then hold only static pod
	// and server.clientCAFile fields) goes on the command line as the
	// kubelet's flags, as a kubeadm-flags.env would carry them.
	KubeletConfig []byte
	// NetNS, when set, is the network namespace (ip netns) the agent runs
	// in (nsenter --net; the mount namespace stays the host's, so runc
	// sees its volume mounts), as node of a multi-node cluster. NodeIP
	// must then be the namespace's address: the node's IP, where the node
	// API, healthz and metrics listen, reachable from the host.
	NetNS string
	// NodeIP, when set, is the node's IP instead of the host's address on
	// the containerd's pod bridge (Containerd.HostIP).
	NodeIP net.IP
}

// Nodelet is a nodelet process started from the binary built from this
// repository, or from NodeletOptions.Binary.
type Nodelet struct {
	Options    NodeletOptions
	Dir        string
	RootDir    string
	PodLogsDir string
	// ContainerLogLinksDir holds the agent's /var/log/containers links.
	ContainerLogLinksDir string
	// CgroupRoot is the agent's cgroupRoot: its own under
	// /nodelet-e2e, removed by Cleanup, unless Options.Config sets one.
	CgroupRoot  string
	HealthzAddr string
	MetricsAddr string
	// ServerAddr is the node API: server.port on the Node's InternalIP,
	// the host's address on the containerd's pod bridge (Containerd.HostIP).
	ServerAddr string
	LogPath    string
	// flags carry the harness's settings with Options.KubeletConfig.
	flags []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// NodeletBinary builds bin/nodelet-e2e from the repository once per process
// and returns its path.
func NodeletBinary(ctx context.Context) (string, error) {
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(root, "bin", "nodelet-e2e")
		if err := BuildGoBinary(ctx, root, "./cmd", buildPath); err != nil {
			buildErr = fmt.Errorf("building nodelet: %w", err)
		}
	})
	return buildPath, buildErr
}

// BuildTags are the build tags of nodelet's binaries, the Makefile's
// GO_TAGS: grpcnotrace leaves out gRPC's request tracing, whose HTML
// templates would make the linker keep every exported method (see the
// Makefile).
const BuildTags = "grpcnotrace"

// BuildGoBinary runs `go build -o output pkg` in moduleDir, the directory
// of another Go module's go.mod (one that extends nodelet, say), so that
// the module's own go.mod and go.sum decide what is built, in the test
// process's environment (a GOWORK or GOFLAGS it has applies, as it did to
// the test), with -tags=BuildTags unless GOFLAGS sets the tags. output is
// made absolute first; pkg is as go build takes it ("." or "./cmd/x").
//
// Test packages run side by side and build the same outputs: builds into
// one directory take turns (a flock on its .build.lock), so that the second
// finds the output up to date and leaves it alone instead of rewriting a
// binary the first may already be running.
func BuildGoBinary(ctx context.Context, moduleDir, pkg, output string) error {
	out, err := filepath.Abs(output)
	if err != nil {
		return fmt.Errorf("building %s of %s: %w", pkg, moduleDir, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("building %s of %s: %w", pkg, moduleDir, err)
	}
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(out), ".build.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("building %s of %s: opening the build lock: %w", pkg, moduleDir, err)
	}
	defer lock.Close() // closing drops the flock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("building %s of %s: locking: %w", pkg, moduleDir, err)
	}
	args := []string{"build", "-o", out}
	if !strings.Contains(os.Getenv("GOFLAGS"), "-tags") {
		args = append(args, "-tags="+BuildTags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = moduleDir
	if combined, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s of %s: %w: %s", pkg, moduleDir, err, combined)
	}
	return nil
}

// binary is the agent binary that opts run.
func (o *NodeletOptions) binary(ctx context.Context) (string, error) {
	if o.Binary != "" {
		return o.Binary, nil
	}
	return NodeletBinary(ctx)
}

// StartNodelet writes the agent's kubeconfig and configuration file and
// starts it, waiting until its health endpoint answers.
func StartNodelet(ctx context.Context, opts NodeletOptions) (*Nodelet, error) {
	bin, err := opts.binary(ctx)
	if err != nil {
		return nil, err
	}
	n := &Nodelet{Options: opts, Dir: opts.Dir}
	if n.Dir == "" {
		if n.Dir, err = os.MkdirTemp("", "nodelet-"+opts.NodeName+"-"); err != nil {
			return nil, fmt.Errorf("creating the nodelet directory: %w", err)
		}
		n.Options.Dir = n.Dir
	}
	n.RootDir = filepath.Join(n.Dir, "root")
	n.PodLogsDir = filepath.Join(n.Dir, "pods-logs")
	n.ContainerLogLinksDir = filepath.Join(n.Dir, "containers-logs")
	n.CgroupRoot = E2ECgroupParent + "/" + filepath.Base(n.Dir)
	if root, ok := opts.Config["cgroupRoot"].(string); ok {
		n.CgroupRoot = root
	}
	n.LogPath = filepath.Join(n.Dir, "nodelet.log")
	if opts.BootstrapKubeconfig == "" {
		restCfg, err := opts.API.NodeUserConfig(opts.NodeName)
		if err != nil {
			return nil, err
		}
		if opts.APIServerURL != "" {
			restCfg.Host, restCfg.CAData = opts.APIServerURL, opts.APIServerCA
		}
		if err := WriteKubeconfig(n.KubeconfigPath(), restCfg, "system:node:"+opts.NodeName); err != nil {
			return nil, err
		}
	}
	if err := n.writeConfig(); err != nil {
		return nil, err
	}
	if err := n.start(ctx, bin, n.args()); err != nil {
		return n, err
	}
	return n, nil
}

// KubeconfigPath is the agent's --kubeconfig.
func (n *Nodelet) KubeconfigPath() string { return filepath.Join(n.Dir, "kubeconfig") }

// args are the agent's command-line flags.
func (n *Nodelet) args() []string {
	args := []string{"--config", filepath.Join(n.Dir, "config.yaml"), "--kubeconfig", n.KubeconfigPath()}
	if n.Options.BootstrapKubeconfig != "" {
		args = append(args, "--bootstrap-kubeconfig", n.Options.BootstrapKubeconfig)
	}
	args = append(args, n.flags...)
	return append(args, n.Options.Args...)
}

func (n *Nodelet) writeConfig() error {
	hp, err := freePort()
	if err != nil {
		return err
	}
	mp, err := freePort()
	if err != nil {
		return err
	}
	sp, err := freePort()
	if err != nil {
		return err
	}
	// The node's address, which the API server dials for the node API, is
	// the host's on this containerd's pod bridge: an address of this
	// machine, private to the instance, and not a loopback one, which the
	// API server refuses to proxy to.
	nodeIP := n.Options.NodeIP
	if nodeIP == nil {
		if nodeIP, err = n.Options.Containerd.HostIP(); err != nil {
			return err
		}
	}
	localIP := "127.0.0.1"
	if n.Options.NetNS != "" {
		// The namespace's loopback is not the host's.
		localIP = nodeIP.String()
	}
	n.HealthzAddr = net.JoinHostPort(localIP, strconv.Itoa(hp))
	n.MetricsAddr = net.JoinHostPort(localIP, strconv.Itoa(mp))
	n.ServerAddr = net.JoinHostPort(nodeIP.String(), strconv.Itoa(sp))
	server := map[string]any{"address": nodeIP.String(), "port": sp}
	if n.Options.API != nil && n.Options.API.KubeletClientCA != nil {
		ca := n.Options.API.KubeletClientCA
		server["clientCAFile"] = ca.CertFile
	}
	cfg := map[string]any{
		"apiVersion":               "config.nodelet.io/v1alpha1",
		"kind":                     "NodeletConfiguration",
		"nodeName":                 n.Options.NodeName,
		"containerRuntimeEndpoint": n.Options.Containerd.Endpoint(),
		"rootDir":                  n.RootDir,
		"podLogsDir":               n.PodLogsDir,
		"containerLogLinksDir":     n.ContainerLogLinksDir,
		"cgroupRoot":               n.CgroupRoot,
		"healthzBindAddress":       n.HealthzAddr,
		"metricsBindAddress":       n.MetricsAddr,
		"nodeIP":                   nodeIP.String(),
		"server":                   server,
		// Image GC only where a spec asks for it: the suite's containerd
		// keeps its images on the machine's disk, whose usage is not the
		// test's, and its test images cannot be pulled again.
		"imageGCHighThresholdPercent": 100,
		// Disk pressure only when the machine is really short, as the
		// conformance run's kubelet: with the kubelet's 10% and 15% a
		// machine whose disk others fill would refuse every pod.
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
	}
	for k, v := range n.Options.Config {
		if v == nil {
			// The field's default, not the harness's value.
			delete(cfg, k)
			continue
		}
		if extra, ok := v.(map[string]any); ok && k == "server" {
			// Merged, so that a spec can set one server field.
			for sk, sv := range extra {
				server[sk] = sv
			}
			continue
		}
		cfg[k] = v
	}
	if n.Options.KubeletConfig != nil {
		n.flags = kubeletFlags(cfg, server)
		return os.WriteFile(filepath.Join(n.Dir, "config.yaml"), n.Options.KubeletConfig, 0o600)
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding the nodelet config: %w", err)
	}
	return os.WriteFile(filepath.Join(n.Dir, "config.yaml"), data, 0o600)
}

// kubeletFlags are the kubelet's flags for what the harness would write in
// the configuration: they override a kubeadm config.yaml's machine paths,
// ports and thresholds, as kubeadm-flags.env does. The cgroup driver is
// cgroupfs (kubeadm writes systemd; no systemd runs the test machine).
func kubeletFlags(cfg, server map[string]any) []string {
	flag := func(name string, v any) string { return fmt.Sprintf("--%s=%v", name, v) }
	eviction := []string{}
	if hard, ok := cfg["evictionHard"].(map[string]string); ok {
		for k, v := range hard {
			eviction = append(eviction, k+"<"+v)
		}
		sort.Strings(eviction)
	}
	out := []string{
		flag("hostname-override", cfg["nodeName"]),
		flag("container-runtime-endpoint", cfg["containerRuntimeEndpoint"]),
		flag("root-dir", cfg["rootDir"]),
		flag("pod-logs-dir", cfg["podLogsDir"]),
		flag("container-log-links-dir", cfg["containerLogLinksDir"]),
		flag("cgroup-root", cfg["cgroupRoot"]),
		flag("cgroup-driver", "cgroupfs"),
		flag("healthz-bind-address", cfg["healthzBindAddress"]),
		flag("metrics-bind-address", cfg["metricsBindAddress"]),
		flag("node-ip", cfg["nodeIP"]),
		flag("address", server["address"]),
		flag("port", server["port"]),
		flag("image-gc-high-threshold", cfg["imageGCHighThresholdPercent"]),
		flag("eviction-hard", strings.Join(eviction, ",")),
	}
	if ca, ok := server["clientCAFile"]; ok {
		out = append(out, flag("client-ca-file", ca))
	}
	if p, ok := cfg["staticPodPath"]; ok {
		out = append(out, flag("pod-manifest-path", p))
	}
	return out
}

// WriteKubeconfig writes a kubeconfig (mode 0600) for cfg's server and
// client certificate, naming the user user.
func WriteKubeconfig(path string, cfg *rest.Config, user string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: user}
	kc.CurrentContext = "default"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

func (n *Nodelet) start(ctx context.Context, bin string, args []string) error {
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the nodelet log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	if ns := n.Options.NetNS; ns != "" {
		// nsenter execs the agent: the pid stays the agent's.
		cmd = exec.Command("nsenter", append([]string{"--net=" + NetNSPath(ns), bin}, args...)...)
	}
	if len(n.Options.Env) > 0 {
		cmd.Env = append(os.Environ(), n.Options.Env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting nodelet: %w", err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done, n.err = cmd, done, nil
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("nodelet exited during start-up (%w); log:\n%s", n.exitErr(), n.LogTail(40))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get("http://" + n.HealthzAddr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("nodelet did not become healthy in time; log:\n%s", n.LogTail(40))
}

func (n *Nodelet) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// PID is the process ID of the running agent.
func (n *Nodelet) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process has not exited.
func (n *Nodelet) Running() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (n *Nodelet) Kill() error { return n.signal(syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits up to a minute for a graceful exit, then kills.
func (n *Nodelet) Stop() error {
	if err := n.signal(syscall.SIGTERM, time.Minute); err != nil {
		return n.Kill()
	}
	return nil
}

func (n *Nodelet) signal(sig syscall.Signal, wait time.Duration) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil || done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("nodelet did not exit within %s of %s", wait, sig)
	}
}

// Restart starts the agent again on the same directory, configuration and
// credentials, after it was stopped or killed. Options.Args, Binary and Env
// are read again, so a spec may change them in between (to turn a
// reconciler off with --controllers, say).
func (n *Nodelet) Restart(ctx context.Context) error {
	if n.Running() {
		return errors.New("restarting nodelet: it is still running")
	}
	bin, err := n.Options.binary(ctx)
	if err != nil {
		return err
	}
	return n.start(ctx, bin, n.args())
}

// Cleanup stops the agent and removes its directory and its cgroups.
func (n *Nodelet) Cleanup() error {
	err := n.Stop()
	if _, own := n.Options.Config["cgroupRoot"]; !own && n.CgroupRoot != "" {
		err = errors.Join(err, RemoveCgroupTree(n.CgroupRoot))
	}
	// Pods left running keep their mounts (subPath bind mounts, tmpfs):
	// removing the directory through them would delete what they show.
	if uerr := unmountUnder(n.Dir); uerr != nil {
		return errors.Join(err, uerr)
	}
	return errors.Join(err, os.RemoveAll(n.Dir))
}

// LogTail returns the last lines of the agent's log.
func (n *Nodelet) LogTail(lines int) string {
	data, err := os.ReadFile(n.LogPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Usage is the agent's resource use as the kernel counts it.
type Usage struct {
	// PeakRSS is the high-water mark of resident memory (VmHWM), in bytes.
	PeakRSS int64
	// CPU is user+system CPU time.
	CPU time.Duration
}

// Usage reads /proc for the running agent.
func (n *Nodelet) Usage() (Usage, error) {
	pid := n.PID()
	if pid == 0 {
		return Usage{}, errors.New("nodelet is not running")
	}
	return ProcessUsage(pid)
}

// ProcessUsage reads the peak RSS and CPU time of a process from /proc.
func ProcessUsage(pid int) (Usage, error) {
	var u Usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if value, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(value)[0], 10, 64)
			u.PeakRSS = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which is in parentheses.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	u.CPU = time.Duration(utime+stime) * time.Second / clkTck
	return u, nil
}

// Metrics returns the text of the agent's /metrics page.
func (n *Nodelet) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.MetricsAddr+"/metrics", http.NoBody)
	if err != nil {
		return "", fmt.Errorf("reading nodelet metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading nodelet metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading nodelet metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading nodelet metrics: %s", resp.Status)
	}
	return string(body), nil
}
