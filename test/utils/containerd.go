package utils

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/go-logr/logr"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// ContainerdOptions tune StartContainerd. The zero value is what most tests
// want.
type ContainerdOptions struct {
	// Images are imported into the k8s.io namespace once the CRI answers.
	// nil means TestImages; an empty, non-nil slice imports nothing (the
	// sandbox image PauseImage is then missing and sandboxes cannot start).
	Images []string
	// InsecureRegistries are registry hosts ("127.0.0.1:5000") that the CRI
	// reaches over plain HTTP. More can be added later with
	// AddInsecureRegistry.
	InsecureRegistries []string
	// LogLevel of containerd ("debug", "info", …); "info" when empty.
	LogLevel string
	// StartTimeout bounds each wait for the CRI to answer; 60s when zero.
	StartTimeout time.Duration
	// RootTmpfsBytes, when set, puts containerd's root (images, snapshots,
	// writable layers) on a tmpfs of that size: a small image filesystem
	// of known capacity, for image GC thresholds.
	RootTmpfsBytes int64
	// NetNS, when set, is the name of a network namespace (ip netns) that
	// the daemon runs in (nsenter --net, the mount namespace stays the
	// host's): its pod bridge and the pods' routes are then that
	// namespace's, as on a node of a multi-node cluster (NodeNetwork).
	NetNS string
	// MountNS, when set, is the file of a mount namespace (nsenter
	// --mount) the daemon runs in instead of the machine's: a node's
	// (NodeMounts.NSPath).
	MountNS string
	// PodCIDRFromRuntime, when set, writes no CNI config: containerd's CRI
	// writes one itself (conf_template: bridge + host-local + portmap on
	// the instance's bridge) once it is sent the pod CIDR with CRI
	// UpdateRuntimeConfig, as nodelet does with its Node's spec.podCIDRs.
	// Until then the CRI reports NetworkReady=false, and StartContainerd
	// waits for RuntimeReady alone. Subnet is then 10.249.N.0/24: the pod
	// CIDR to give the Node. HostIP puts Subnet's first address on the
	// bridge, and the bridge plugin refuses a bridge whose address is not
	// its pod CIDR's gateway: with HostIP, the Node's pod CIDR must be
	// Subnet.
	PodCIDRFromRuntime bool
	// CDISpecDirs are more directories of CDI specs the CRI reads, after
	// its own (CDISpecDir): a machine-wide one such as /var/run/cdi, where
	// a driver's pod writes specs through a hostPath volume. They are made
	// when missing.
	CDISpecDirs []string
	// PodAddresses, when above the 253 pod addresses of a /24, makes
	// Subnet a larger block, 10.250.N.0/23 or /22 (up to 1021): 2 or 4
	// slots that follow each other, from an N they divide, all held. (The
	// CNI bridge plugin gives a bridge one IPv4 gateway, so a node of more
	// pods needs one subnet that holds them.) Not with
	// PodCIDRFromRuntime.
	PodAddresses int
}

// Containerd is a private containerd started by StartContainerd. Its root,
// state, socket, config, CNI config, IPAM data, runc state and log all live
// under Dir, and its pods are attached to a bridge and subnet of their own.
type Containerd struct {
	// Dir is the temporary directory holding everything of this instance.
	Dir string
	// Subnet is the pod subnet of this instance (10.250.N.0/24, or
	// 10.249.N.0/24 with PodCIDRFromRuntime, or larger with PodAddresses);
	// every sandbox gets an IP in it.
	Subnet *net.IPNet
	// Bridge is the name of the CNI bridge (nlbrN).
	Bridge string
	// Network is the name of the CNI network (nodelet-N).
	Network string
	// BinDir holds the runtime's containerd, containerd-shim-runc-v2, ctr
	// and runc (RuntimeBinDir): the daemon runs with it first on PATH.
	BinDir string

	opts    ContainerdOptions
	socket  string
	config  string
	logPath string
	slot    *slot
	// extraSlots are the slots after slot that a Subnet of more than a
	// /24 spans.
	extraSlots []*slot

	mu      sync.Mutex
	proc    *daemon // nil while the daemon is not running
	stopped bool
}

// daemon is one run of the containerd process.
type daemon struct {
	pid  int
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // exit error, valid after done is closed
}

const (
	// subnetPrefix is the /16 the pod subnets of all instances are cut from.
	subnetPrefix = "10.250"
	// runtimeSubnetPrefix is the /16 of the pod CIDRs of instances with
	// PodCIDRFromRuntime: apart from subnetPrefix, so that a pod CIDR given
	// to a Node never overlaps a fixed subnet.
	runtimeSubnetPrefix = "10.249"
	// daemonStopTimeout is how long containerd gets between SIGTERM and SIGKILL.
	daemonStopTimeout = 10 * time.Second
	// cleanupTimeout bounds removing each pod sandbox left at Stop.
	cleanupTimeout = 60 * time.Second
	// criCallTimeout bounds one CRI call of the harness.
	criCallTimeout = 10 * time.Second
)

// StartContainerd starts a containerd that shares nothing with a system
// containerd or with other test runs: its own --root, --state and --address
// under a new temporary directory, CNI configuration (bridge nlbrN, subnet
// 10.250.N.0/24, N unique among the instances running on this machine), runc
// state and registry hosts directory. The CRI plugin is configured for this
// machine kind (restrict_oom_score_adj, cgroupfs, PauseImage as the sandbox
// image). It installs the Debian packages first when containerd is missing,
// waits for the CRI to report the runtime and the network ready, imports the
// test images, and returns. Stop undoes everything.
func StartContainerd(ctx context.Context, opts ContainerdOptions) (_ *Containerd, err error) {
	if opts.Images == nil {
		opts.Images = TestImages
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if err := ensureDeps(ctx, "iptables"); err != nil {
		return nil, err
	}
	binDir, err := RuntimeBinDir(ctx)
	if err != nil {
		return nil, err
	}
	// Build the archives before anything runs: the first build compiles.
	archives := make([]string, 0, len(opts.Images))
	for _, image := range opts.Images {
		path, err := ImageArchive(ctx, image)
		if err != nil {
			return nil, err
		}
		archives = append(archives, path)
	}

	dir, err := os.MkdirTemp("", "nodelet-containerd-")
	if err != nil {
		return nil, fmt.Errorf("creating containerd directory: %w", err)
	}
	c := &Containerd{
		Dir:     dir,
		BinDir:  binDir,
		opts:    opts,
		socket:  filepath.Join(dir, "containerd.sock"),
		config:  filepath.Join(dir, "config.toml"),
		logPath: filepath.Join(dir, "containerd.log"),
	}
	if len(c.socket) > 100 {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerd socket path %s is too long for a unix socket: set TMPDIR to a shorter directory", c.socket)
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and cleaning up: %w)", err, stopErr)
			}
		}
	}()

	slots, err := subnetSlots(opts)
	if err != nil {
		return c, err
	}
	held, err := acquireSlots(dir, slots)
	if err != nil {
		return c, err
	}
	c.slot, c.extraSlots = held[0], held[1:]
	n := c.slot.n
	c.Bridge = slotBridge(n)
	c.Network = fmt.Sprintf("nodelet-%d", n)
	prefix := subnetPrefix
	if opts.PodCIDRFromRuntime {
		prefix = runtimeSubnetPrefix
	}
	_, c.Subnet, _ = net.ParseCIDR(fmt.Sprintf("%s.%d.0/%d", prefix, n, 24-bits.TrailingZeros(uint(slots))))

	if err := c.writeConfig(); err != nil {
		return c, err
	}
	for _, host := range opts.InsecureRegistries {
		if err := c.AddInsecureRegistry(host); err != nil {
			return c, err
		}
	}
	if err := c.StartProcess(ctx); err != nil {
		return c, err
	}
	for i, archive := range archives {
		if err := c.importImage(ctx, opts.Images[i], archive); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Endpoint is the CRI endpoint, "unix://<Dir>/containerd.sock".
func (c *Containerd) Endpoint() string { return "unix://" + c.socket }

// LogPath is the file containerd logs to, across restarts. Print it when a
// test fails.
func (c *Containerd) LogPath() string { return c.logPath }

// Running reports whether the daemon process is up.
func (c *Containerd) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc != nil
}

// AddInsecureRegistry lets the CRI pull from host ("127.0.0.1:5000") over
// plain HTTP. It writes <Dir>/certs.d/<host>/hosts.toml; the CRI reads that
// directory (registry config_path) at every pull, so it takes effect at once,
// also on a running containerd. Credentials still come from the pull
// request's AuthConfig.
func (c *Containerd) AddInsecureRegistry(host string) error {
	if host == "" || strings.ContainsAny(host, "/\"\\ ") {
		return fmt.Errorf("adding insecure registry: invalid host %q", host)
	}
	dir := filepath.Join(c.Dir, "certs.d", host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("adding insecure registry %s: %w", host, err)
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n",
		"http://"+host, "http://"+host)
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("adding insecure registry %s: %w", host, err)
	}
	return nil
}

// AddMirror makes the CRI pull upstream's images ("registry.k8s.io")
// from mirror ("127.0.0.1:5000", plain HTTP) and from upstream itself only
// when the mirror does not have them. Like AddInsecureRegistry it writes
// <Dir>/certs.d/<upstream>/hosts.toml and takes effect at the next pull.
func (c *Containerd) AddMirror(upstream, mirror string) error {
	for _, h := range []string{upstream, mirror} {
		if h == "" || strings.ContainsAny(h, "/\"\\ ") {
			return fmt.Errorf("adding mirror %s of %s: invalid host %q", mirror, upstream, h)
		}
	}
	dir := filepath.Join(c.Dir, "certs.d", upstream)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("adding mirror %s of %s: %w", mirror, upstream, err)
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n",
		"https://"+upstream, "http://"+mirror)
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("adding mirror %s of %s: %w", mirror, upstream, err)
	}
	return nil
}

// SecondRuntimeHandler is a runtime handler the harness's containerd has
// besides its default one (runc), on the same runc: a RuntimeClass may
// name it.
const SecondRuntimeHandler = "runc-e2e"

// configTemplate is the configuration of a containerd 1.6 (version 2 of
// the file); configV3Template is containerd 2's. Both say the same.
var configTemplate = template.Must(template.New("config").Funcs(template.FuncMap{"q": strconv.Quote}).Parse(`# containerd of one nodelet test run; generated by test/utils.
version = 2
root = {{q .Root}}
state = {{q .State}}
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = {{q .Socket}}

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = {{q .Opt}}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {{q .SandboxImage}}
  # The sandbox lacks CAP_SYS_RESOURCE: lowering oom_score_adj fails.
  restrict_oom_score_adj = true
  # Network namespaces under our state directory, not /var/run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # cgroup v1 with the cgroupfs driver: there is no systemd here.
        SystemdCgroup = false
        Root = {{q .RuncRoot}}
        BinaryName = {{q .Runc}}

    # A second handler on the same runc, for RuntimeClass specs.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc-e2e]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc-e2e.options]
        SystemdCgroup = false
        Root = {{q .RuncRoot}}
        BinaryName = {{q .Runc}}

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = {{q .CNIConfDir}}
    max_conf_num = 1
{{- if .CNITemplate}}
    # The CNI config is written into conf_dir from this template once the
    # CRI is sent the pod CIDR (UpdateRuntimeConfig).
    conf_template = {{q .CNITemplate}}
{{- end}}

  [plugins."io.containerd.grpc.v1.cri".registry]
    # One hosts.toml per registry host; see AddInsecureRegistry.
    config_path = {{q .RegistryHosts}}
`))

// configV3Template is configTemplate in containerd 2's terms (version 3 of
// the file, which containerd 2.0 and every later 2.x read without a
// deprecation warning): the CRI's runtime half (handlers, CNI, security
// knobs) in io.containerd.cri.v1.runtime, its image half (snapshotter,
// sandbox image, registries) in io.containerd.cri.v1.images, and only the
// streaming server left in io.containerd.grpc.v1.cri. NRI, on by default
// in containerd 2, is off: its socket is one per machine
// (/var/run/nri/nri.sock), and instances running side by side would take
// it from each other.
var configV3Template = template.Must(template.New("config-v3").Funcs(template.FuncMap{"q": strconv.Quote}).Parse(`# containerd 2 of one nodelet test run; generated by test/utils.
version = 3
root = {{q .Root}}
state = {{q .State}}
disabled_plugins = [
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = {{q .Socket}}

[ttrpc]
  address = {{q .TTRPCSocket}}

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = {{q .Opt}}

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"

  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {{q .SandboxImage}}

  [plugins."io.containerd.cri.v1.images".registry]
    # One hosts.toml per registry host; see AddInsecureRegistry.
    config_path = {{q .RegistryHosts}}

[plugins."io.containerd.cri.v1.runtime"]
  # The sandbox lacks CAP_SYS_RESOURCE: lowering oom_score_adj fails.
  restrict_oom_score_adj = true
  # Network namespaces under our state directory, not /var/run/netns.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  # CDI devices (DRA drivers', always applied by containerd 2.4) from a
  # directory of this instance, which the tests' drivers write their specs
  # into (CDISpecDir).
  cdi_spec_dirs = [{{.CDIDirs}}]

  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        # cgroup v1 with the cgroupfs driver: there is no systemd here.
        SystemdCgroup = false
        Root = {{q .RuncRoot}}
        BinaryName = {{q .Runc}}

    # A second handler on the same runc, for RuntimeClass specs.
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc-e2e]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc-e2e.options]
        SystemdCgroup = false
        Root = {{q .RuncRoot}}
        BinaryName = {{q .Runc}}

  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = {{q .CNIConfDir}}
    max_conf_num = 1
{{- if .CNITemplate}}
    # The CNI config is written into conf_dir from this template once the
    # CRI is sent the pod CIDR (UpdateRuntimeConfig).
    conf_template = {{q .CNITemplate}}
{{- end}}

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`))

var cniTemplate = template.Must(template.New("cni").Funcs(template.FuncMap{"q": strconv.Quote}).Parse(`{
  "cniVersion": "1.0.0",
  "name": {{q .Network}},
  "plugins": [
    {
      "type": "bridge",
      "bridge": {{q .Bridge}},
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": {{q .Subnet}}}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": {{q .IPAMDir}}
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
`))

// cniConfTemplate is containerd's CRI conf_template of an instance with
// PodCIDRFromRuntime: the fixed conflist's network with the pod CIDR ranges
// and routes left to containerd, which fills in {{.PodCIDRRanges}} and
// {{.Routes}} from UpdateRuntimeConfig. Its own fields use [[ ]].
var cniConfTemplate = template.Must(template.New("cni-template").Delims("[[", "]]").Funcs(template.FuncMap{"q": strconv.Quote}).Parse(`{
  "cniVersion": "1.0.0",
  "name": [[q .Network]],
  "plugins": [
    {
      "type": "bridge",
      "bridge": [[q .Bridge]],
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [{{range $i, $r := .PodCIDRRanges}}{{if $i}}, {{end}}[{"subnet": "{{$r}}"}]{{end}}],
        "routes": [{{range $i, $r := .Routes}}{{if $i}}, {{end}}{"dst": "{{$r}}"}{{end}}],
        "dataDir": [[q .IPAMDir]]
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
`))

// subnetSlots is how many /24 slots the pod subnet of opts spans: 1, 2
// or 4.
func subnetSlots(opts ContainerdOptions) (int, error) {
	const perSlot = 256
	switch n := opts.PodAddresses; {
	case n <= perSlot-3:
		return 1, nil
	case opts.PodCIDRFromRuntime:
		return 0, errors.New("starting containerd: PodAddresses with PodCIDRFromRuntime")
	case n <= 2*perSlot-3:
		return 2, nil
	case n <= 4*perSlot-3:
		return 4, nil
	default:
		return 0, fmt.Errorf("starting containerd: %d pod addresses, more than a /22 holds", n)
	}
}

func (c *Containerd) writeConfig() error {
	vals := map[string]string{
		"Root":          filepath.Join(c.Dir, "root"),
		"State":         filepath.Join(c.Dir, "state"),
		"Socket":        c.socket,
		"Opt":           filepath.Join(c.Dir, "opt"),
		"SandboxImage":  PauseImage,
		"RuncRoot":      filepath.Join(c.Dir, "runc"),
		"Runc":          filepath.Join(c.BinDir, "runc"),
		"TTRPCSocket":   c.socket + ".ttrpc",
		"CNIConfDir":    filepath.Join(c.Dir, "cni", "net.d"),
		"RegistryHosts": filepath.Join(c.Dir, "certs.d"),
		"Network":       c.Network,
		"Bridge":        c.Bridge,
		"Subnet":        c.Subnet.String(),
		"IPAMDir":       filepath.Join(c.Dir, "cni", "ipam"),
		"CDIDirs":       tomlStrings(append([]string{c.CDISpecDir()}, c.opts.CDISpecDirs...)),
	}
	for _, d := range []string{"root", "state", "opt", "runc", "cni/net.d", "cni/ipam", "certs.d", "cdi"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return fmt.Errorf("creating containerd directory %s: %w", d, err)
		}
	}
	for _, d := range c.opts.CDISpecDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating the CDI spec directory %s: %w", d, err)
		}
	}
	if n := c.opts.RootTmpfsBytes; n > 0 {
		if err := syscall.Mount("tmpfs", vals["Root"], "tmpfs", 0, fmt.Sprintf("size=%d", n)); err != nil {
			return fmt.Errorf("mounting a tmpfs as containerd's root: %w", err)
		}
	}
	if c.opts.PodCIDRFromRuntime {
		vals["CNITemplate"] = filepath.Join(c.Dir, "cni", "conf-template.json")
		if err := writeTemplate(vals["CNITemplate"], cniConfTemplate, vals); err != nil {
			return fmt.Errorf("writing CNI config template: %w", err)
		}
	}
	tmpl := configTemplate
	if c.containerd2() {
		tmpl = configV3Template
	}
	if err := writeTemplate(c.config, tmpl, vals); err != nil {
		return fmt.Errorf("writing containerd config: %w", err)
	}
	if c.opts.PodCIDRFromRuntime {
		return nil
	}
	conflist := filepath.Join(vals["CNIConfDir"], "10-"+c.Network+".conflist")
	if err := writeTemplate(conflist, cniTemplate, vals); err != nil {
		return fmt.Errorf("writing CNI config: %w", err)
	}
	return nil
}

// CDISpecDir is the directory of CDI specs the instance reads (containerd
// 2 only: containerd 1.6 applies no CDI devices).
func (c *Containerd) CDISpecDir() string { return filepath.Join(c.Dir, "cdi") }

// containerd2 reports whether the instance runs containerd 2, whose
// configuration is version 3.
func (c *Containerd) containerd2() bool {
	return IsContainerd2()
}

// tomlStrings renders strs as the items of a TOML array of strings.
func tomlStrings(strs []string) string {
	quoted := make([]string, len(strs))
	for i, s := range strs {
		quoted[i] = strconv.Quote(s)
	}
	return strings.Join(quoted, ", ")
}

func writeTemplate(path string, t *template.Template, data any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.Execute(f, data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// StartProcess starts the daemon (again) on the existing state and waits
// until the CRI reports the runtime and the network ready. A no-op when it
// is running. Containers that ran through a StopProcess are found again.
func (c *Containerd) StartProcess(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("starting containerd: the instance was stopped")
	}
	if c.proc != nil {
		return nil
	}
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening containerd log: %w", err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== nodelet test harness: starting containerd at %s\n", time.Now().Format(time.RFC3339Nano))

	args := []string{filepath.Join(c.BinDir, "containerd"),
		"--config", c.config,
		"--address", c.socket,
		"--root", filepath.Join(c.Dir, "root"),
		"--state", filepath.Join(c.Dir, "state"),
		"--log-level", c.opts.LogLevel}
	if c.opts.NetNS != "" || c.opts.MountNS != "" {
		// nsenter execs containerd: the pid stays the daemon's.
		var enter []string
		if c.opts.NetNS != "" {
			enter = append(enter, "--net="+NetNSPath(c.opts.NetNS))
		}
		if c.opts.MountNS != "" {
			enter = append(enter, "--mount="+c.opts.MountNS, "--wdns="+c.Dir)
		}
		args = append(append([]string{"nsenter"}, enter...), args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = c.Dir
	env, err := RuntimePathEnv(ctx, os.Environ(), "TMPDIR="+os.TempDir())
	if err != nil {
		return fmt.Errorf("starting containerd: %w", err)
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Out of the test's process group: a ^C reaches the test, whose
		// cleanup stops containerd in order.
		Setpgid: true,
		// If the test process dies without cleaning up, so does containerd.
		Pdeathsig: syscall.SIGKILL,
	}
	d, err := startLocked(cmd)
	if err != nil {
		return fmt.Errorf("starting containerd: %w", err)
	}
	c.proc = d
	if err := c.waitReady(ctx, d); err != nil {
		return fmt.Errorf("waiting for containerd (log %s): %w", c.logPath, err)
	}
	return nil
}

// startLocked starts cmd from a goroutine that holds its OS thread until the
// process exits. Pdeathsig fires when the thread that started the child ends,
// and the Go runtime may end a thread whenever a goroutine exits locked to it;
// holding a thread of our own makes "parent died" mean the test process died.
func startLocked(cmd *exec.Cmd) (*daemon, error) {
	d := &daemon{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(d.done)
			return
		}
		d.pid = cmd.Process.Pid
		started <- nil
		d.err = cmd.Wait()
		close(d.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

// quietContext carries a logger that drops the CRI client's log lines: the
// harness retries while containerd starts and reports what finally failed.
func quietContext(ctx context.Context) context.Context {
	return klog.NewContext(ctx, logr.Discard())
}

func (c *Containerd) dialRuntime(ctx context.Context) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(c.Endpoint()).
		WithConnectionTimeout(criCallTimeout).
		WithTracerProvider(nil).
		Build(quietContext(ctx))
}

func (c *Containerd) dialImages(ctx context.Context) (internalapi.ImageManagerService, error) {
	return remote.NewRemoteImageServiceBuilder().
		WithEndpoint(c.Endpoint()).
		WithConnectionTimeout(criCallTimeout).
		WithTracerProvider(nil).
		Build(quietContext(ctx))
}

// waitReady polls the CRI until RuntimeReady and NetworkReady are true.
func (c *Containerd) waitReady(ctx context.Context, d *daemon) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	last := errors.New("no answer yet")
	for {
		select {
		case <-d.done:
			return fmt.Errorf("containerd exited: %w\n%s", d.err, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("CRI not ready: %w (last: %w)\n%s", ctx.Err(), last, c.logTail())
		default:
		}
		last = c.criReady(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-d.done:
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Containerd) criReady(ctx context.Context) error {
	if _, err := os.Stat(c.socket); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, criCallTimeout)
	defer cancel()
	rs, err := c.dialRuntime(ctx)
	if err != nil {
		return err
	}
	defer rs.Close(ctx)
	st, err := rs.Status(quietContext(ctx), false)
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, cond := range st.GetStatus().GetConditions() {
		ready[cond.GetType()] = cond.GetStatus()
	}
	want := []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady}
	if c.opts.PodCIDRFromRuntime {
		// The network waits for the pod CIDR (UpdateRuntimeConfig).
		want = want[:1]
	}
	for _, cond := range want {
		if !ready[cond] {
			return fmt.Errorf("condition %s is not true: %v", cond, st.GetStatus().GetConditions())
		}
	}
	return nil
}

// LogTail returns the last n lines of containerd's log (the log itself is
// removed by Stop: print this when a test fails).
func (c *Containerd) LogTail(n int) string { return TailLines(c.logPath, n) }

func (c *Containerd) logTail() string {
	return "containerd log tail:\n" + c.LogTail(40)
}

// Ctr returns the command `ctr --address <socket> --namespace k8s.io
// args...` with the instance's own ctr (the selected runtime's).
func (c *Containerd) Ctr(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(c.BinDir, "ctr"),
		append([]string{"--address", c.socket, "--namespace", "k8s.io"}, args...)...)
}

// ImportArchive imports the docker-archive tarball at archive, which holds
// image, into the k8s.io namespace, and waits until the CRI lists it.
func (c *Containerd) ImportArchive(ctx context.Context, image, archive string) error {
	return c.importImage(ctx, image, archive)
}

// importImage imports a docker-archive into the CRI's namespace and waits
// until the CRI's own image store has it.
func (c *Containerd) importImage(ctx context.Context, image, archive string) error {
	cmd := c.Ctr(ctx, "images", "import", "--all-platforms", "--snapshotter", "overlayfs", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("importing %s from %s: %w\n%s", image, archive, err, out)
	}
	is, err := c.dialImages(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the CRI image service: %w", err)
	}
	defer is.Close(ctx)
	deadline := time.Now().Add(criCallTimeout)
	for {
		resp, err := is.ImageStatus(quietContext(ctx), &runtimeapi.ImageSpec{Image: image}, false)
		if err == nil && resp.GetImage() != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("imported %s but the CRI does not list it (err %w)", image, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StopProcess stops only the daemon (SIGTERM, then SIGKILL after 10s) and
// keeps its state, its shims and their containers, the way a containerd
// restart on a node does. A no-op when it is not running.
func (c *Containerd) StopProcess() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopProcessLocked()
}

func (c *Containerd) stopProcessLocked() error {
	d := c.proc
	if d == nil {
		return nil
	}
	c.proc = nil
	_ = syscall.Kill(d.pid, syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(daemonStopTimeout):
	}
	_ = syscall.Kill(d.pid, syscall.SIGKILL)
	select {
	case <-d.done:
		return nil
	case <-time.After(daemonStopTimeout):
		return fmt.Errorf("stopping containerd: pid %d did not exit after SIGKILL", d.pid)
	}
}

// Stop tears the instance down: it removes every pod sandbox through the CRI
// (so CNI releases addresses and port mappings), stops the daemon, kills any
// shim of this instance and the processes under it, unmounts whatever is
// left under Dir, deletes the bridge and removes Dir. Safe to call twice and
// on a partly started instance.
func (c *Containerd) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	if c.proc != nil {
		if err := c.removeSandboxes(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.stopProcessLocked(); err != nil {
		errs = append(errs, err)
	}
	if err := teardownInstance(c.Dir, c.Bridge); err != nil {
		errs = append(errs, err)
	}
	if ns := c.opts.NetNS; ns != "" && c.Bridge != "" {
		// The bridge is the namespace's; gone already when the namespace is.
		_ = exec.Command("ip", "-n", ns, "link", "delete", c.Bridge).Run()
	}
	if c.slot != nil {
		c.slot.release()
	}
	for _, s := range c.extraSlots {
		s.release()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping containerd in %s: %w", c.Dir, err)
	}
	return nil
}

// removeSandboxes stops and removes every pod sandbox (and so every
// container) of this instance, a few at a time, each within
// cleanupTimeout: containerd 2 takes a second or more to stop a sandbox on
// a loaded machine, and a suite may leave dozens. Every sandbox here is the
// test's own.
func (c *Containerd) removeSandboxes() error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	rs, err := c.dialRuntime(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the CRI to remove sandboxes: %w", err)
	}
	defer rs.Close(ctx)
	sandboxes, err := rs.ListPodSandbox(quietContext(ctx), nil)
	if err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	errs := make([]error, len(sandboxes))
	var wg sync.WaitGroup
	slots := make(chan struct{}, sandboxRemovers)
	for i, sb := range sandboxes {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			errs[i] = RemoveSandbox(quietContext(ctx), rs, sb.GetId())
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sandboxRemovers is how many sandboxes removeSandboxes removes at once.
const sandboxRemovers = 4

// sandboxRemoveWait bounds how long RemoveSandbox retries a sandbox whose
// containers the runtime still sees running.
const sandboxRemoveWait = 30 * time.Second

// RemoveSandbox stops and removes the pod sandbox id and its containers.
// The runtime sees a killed container running until it has handled its
// exit ("container is still running, to stop first"), which takes longer on
// a loaded machine or for a container that was starting as the sandbox
// stopped: until ctx ends or sandboxRemoveWait passes, it stops the
// sandbox's containers that are not seen exited one by one and tries
// again.
func RemoveSandbox(ctx context.Context, rs internalapi.RuntimeService, id string) error {
	if err := rs.StopPodSandbox(ctx, id); err != nil {
		return fmt.Errorf("stopping sandbox %s: %w", id, err)
	}
	deadline := time.Now().Add(sandboxRemoveWait)
	pause := 100 * time.Millisecond
	for {
		err := rs.RemovePodSandbox(ctx, id)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("removing sandbox %s: %w", id, err)
		}
		cs, lerr := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id})
		if lerr == nil {
			for _, c := range cs {
				if c.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
					_ = rs.StopContainer(ctx, c.GetId(), 0)
				}
			}
		}
		_ = rs.StopPodSandbox(ctx, id)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// HostIP returns the host's address on the instance's pod bridge (the
// first address of Subnet, the pods' gateway), creating the bridge with it
// when no pod did yet. It is an address of this machine that is not a
// loopback one, which the API server proxies to (it refuses loopback node
// addresses for nodes/proxy), and pods reach, as they reach a node's IP.
// The bridge goes with the instance. With NetNS the bridge and the address
// are the namespace's: its pods' gateway, not an address of the host.
func (c *Containerd) HostIP() (net.IP, error) {
	ip := slices.Clone(c.Subnet.IP.To4())
	ip[3]++
	if _, err := c.ipOutput("link", "show", "dev", c.Bridge); err != nil {
		if out, err := c.ipOutput("link", "add", c.Bridge, "type", "bridge"); err != nil {
			return nil, fmt.Errorf("creating bridge %s: %w: %s", c.Bridge, err, out)
		}
	}
	addrs, err := c.ipOutput("-o", "addr", "show", "dev", c.Bridge)
	if err != nil {
		return nil, fmt.Errorf("reading the addresses of bridge %s: %w: %s", c.Bridge, err, addrs)
	}
	if !strings.Contains(string(addrs), " "+ip.String()+"/") {
		ones, _ := c.Subnet.Mask.Size()
		cidr := fmt.Sprintf("%s/%d", ip, ones)
		if out, err := c.ipOutput("addr", "add", cidr, "dev", c.Bridge); err != nil {
			return nil, fmt.Errorf("adding %s to bridge %s: %w: %s", cidr, c.Bridge, err, out)
		}
	}
	if out, err := c.ipOutput("link", "set", c.Bridge, "up"); err != nil {
		return nil, fmt.Errorf("bringing bridge %s up: %w: %s", c.Bridge, err, out)
	}
	return ip, nil
}

// ipOutput runs ip with args in the instance's network namespace.
func (c *Containerd) ipOutput(args ...string) ([]byte, error) {
	if c.opts.NetNS != "" {
		args = append([]string{"-n", c.opts.NetNS}, args...)
	}
	return exec.Command("ip", args...).CombinedOutput()
}
