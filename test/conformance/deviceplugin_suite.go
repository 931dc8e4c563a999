package conformance

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
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/conformance/deviceplugin"
	"github.com/nodelet/nodelet/test/utils"
)

// DevicePluginSpecsPackage is the package of our ports of the node suite's
// device plugin and pod resources specs, which e2e.test does not contain.
const DevicePluginSpecsPackage = "./test/conformance/deviceplugin"

// DevicePluginFocus selects every spec of the device plugin suite (our
// ports keep the node suite's names). Unanchored: ginkgo matches it
// against the suite's description and the spec's name.
var DevicePluginFocus = []string{
	`\[sig-node\] (Device Plugin|POD Resources API) `,
}

// DevicePluginNotPorted are the node suite's device plugin and pod
// resources specs that the device plugin suite does not run, and why.
var DevicePluginNotPorted = []SkipEntry{
	{Name: "[sig-node] Device Plugin [Serial] [Feature:DevicePlugin] DevicePlugin [Serial] [Disruptive] Does not keep device plugin assignments across node reboots if fails admission (no pod restart, no device plugin re-registration)", Reason: "needs the plugin's controlled registration (REGISTER_CONTROL_FILE) and a node reboot simulated by removing every sandbox through the CRI; not ported yet"},
	{Name: "[sig-node] Device Plugin Failures ...", Reason: "device_plugin_failures_test.go and device_plugin_failures_pod_status_test.go register the node suite's in-process test plugin (test/e2e_node/testdeviceplugin) from the test binary, not the sample device plugin; not ported yet"},
	{Name: "[sig-node] POD Resources API ... with SRIOV devices in the system ...", Reason: "need SR-IOV virtual functions and the SR-IOV device plugin; this machine has none"},
	{Name: "[sig-node] POD Resources API ... with CPU manager Static policy ...", Reason: "reconfigure the kubelet with the static CPU manager policy and reserved CPUs and check exclusive CPU IDs; nodelet has no CPU manager, and the harness's agents run with the none policy"},
	{Name: "[sig-node] POD Resources API ... checking core resource managers assignments ...", Reason: "the static CPU manager policy (and 8 allocatable CPUs; this machine has 2)"},
	{Name: "[sig-node] POD Resources API ... with a topology-unaware device plugin ... should return proper podresources the same as before the restart of kubelet", Reason: "runs under the static CPU manager policy and expects an exclusive CPU for its pod"},
	{Name: "[sig-node] Pod Resources API Pod Level Resources ...", Reason: "the static CPU manager policy and the topology manager's pod and container scopes, behind alpha feature gates"},
}

// DevicePluginRunOptions describe one run of the device plugin specs
// against a cluster.
type DevicePluginRunOptions struct {
	Cluster *Cluster
	// ReportDir receives the JUnit report, the specs' environment and the
	// agent control's log.
	ReportDir string
	// Focus and Skip are regular expressions over spec names.
	Focus, Skip []string
	// Timeout bounds the whole run (1h when 0).
	Timeout time.Duration
	// Output receives the specs' output; nil discards it.
	Output io.Writer
}

// RunDevicePluginSpecs builds the specs' test binary (cached by the Go
// build cache), serves an AgentControl for the cluster's agent, and runs
// the selected specs against the cluster, reading their outcomes back from
// the JUnit report. Failed specs are not an error; a run that wrote no
// report is.
func RunDevicePluginSpecs(ctx context.Context, opts DevicePluginRunOptions) (*Report, error) {
	if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the report directory: %w", err)
	}
	bin, err := DevicePluginSpecsBinary(ctx)
	if err != nil {
		return nil, err
	}
	ctl, err := StartAgentControl(opts.Cluster)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	env, err := DevicePluginEnvironment(opts.Cluster, ctl.URL)
	if err != nil {
		return nil, err
	}
	envPath := filepath.Join(opts.ReportDir, "environment.json")
	if err := env.Write(envPath); err != nil {
		return nil, err
	}
	report := filepath.Join(opts.ReportDir, junitFile)
	_ = os.Remove(report)
	cmd := exec.CommandContext(ctx, bin, devicePluginArgs(opts, envPath, report)...)
	cmd.Dir = opts.ReportDir
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Interrupted like ^C, ginkgo still cleans up and writes its report.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 3 * time.Minute
	runErr := cmd.Run()
	r, err := ReadJUnit(report)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("running the device plugin specs: %w", runErr), err)
	}
	return r, nil
}

// devicePluginArgs are the test binary's flags.
func devicePluginArgs(opts DevicePluginRunOptions, envPath, report string) []string {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = time.Hour
	}
	args := []string{
		"-test.v",
		"-test.timeout=" + (timeout + 5*time.Minute).String(),
		"-ginkgo.timeout=" + timeout.String(),
		"-ginkgo.no-color",
		"-ginkgo.junit-report=" + report,
		"-environment=" + envPath,
	}
	for _, f := range opts.Focus {
		args = append(args, "-ginkgo.focus="+f)
	}
	for _, s := range opts.Skip {
		args = append(args, "-ginkgo.skip="+s)
	}
	return args
}

// kubeletDevicePluginDir is the kubelet's device plugins directory
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1.DevicePluginPath), which
// its --root-dir does not move: one per machine, so one kubelet with
// device plugins at a time.
const kubeletDevicePluginDir = "/var/lib/kubelet/device-plugins"

// DevicePluginEnvironment is what the specs are told of c, with the agent
// control at control.
func DevicePluginEnvironment(c *Cluster, control string) (deviceplugin.Environment, error) {
	env := deviceplugin.Environment{
		Kubeconfig:      c.Kubeconfig,
		NodeName:        c.Options.NodeName,
		Agent:           string(c.Options.Agent),
		CDISpecDir:      c.Containerd.CDISpecDir(),
		RuntimeEndpoint: c.Containerd.Endpoint(),
		AgentControl:    control,
	}
	switch {
	case c.Nodelet != nil:
		env.RootDir = c.Nodelet.RootDir
		env.DevicePluginDir = filepath.Join(env.RootDir, "device-plugins")
		env.AgentHealthz = "http://" + c.Nodelet.HealthzAddr + "/healthz"
	case c.Kubelet != nil:
		env.RootDir = filepath.Join(c.Kubelet.Dir, "root")
		// Not under its root directory: the kubelet's device manager
		// serves the path compiled into it.
		env.DevicePluginDir = kubeletDevicePluginDir
		env.AgentHealthz = "http://" + c.Kubelet.HealthzAddr + "/healthz"
	default:
		return env, errors.New("the cluster has no node agent")
	}
	return env, nil
}

// DevicePluginSpecsBinary builds the specs' test binary into
// <cache>/conformance-deviceplugin and returns its path. Concurrent
// builds take turns, so that none rewrites a binary another runs.
func DevicePluginSpecsBinary(ctx context.Context) (string, error) {
	root, err := utils.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := utils.CacheDir("conformance-deviceplugin")
	if err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".build.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("building the device plugin specs: %w", err)
	}
	defer lock.Close() // closing drops the flock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("building the device plugin specs: locking: %w", err)
	}
	out := filepath.Join(dir, "deviceplugin.test")
	args := []string{"test", "-c", "-o", out}
	if !strings.Contains(os.Getenv("GOFLAGS"), "-tags") {
		args = append(args, "-tags="+utils.BuildTags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, DevicePluginSpecsPackage)...)
	cmd.Dir = root
	if combined, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the device plugin specs: %w: %s", err, combined)
	}
	return out, nil
}

// agentControlTimeout bounds one stop or start of the agent.
const agentControlTimeout = 3 * time.Minute

// agentSettle is how long a start waits past the agent's first healthy
// answer. Here an agent answers its health check half a second after it
// starts, before it has read its pods back from the API server; on a
// node, a systemctl restart and the agent's start take seconds, and the
// node suite's restart specs, which go on at once, lean on that (the
// kubelet listed no pod in its first pod resources answer without it).
const agentSettle = 5 * time.Second

// AgentControl lets the device plugin specs stop and start the node agent
// of a Cluster, which the harness owns, as the node suite's specs use
// systemctl: POST /stop stops it (SIGTERM, as systemctl stop and kill
// do), POST /start starts it again on the same directory and returns
// once it is healthy and agentSettle has passed, POST /restart does both. It listens on loopback;
// one request is served at a time.
type AgentControl struct {
	// URL is its base URL.
	URL string

	cluster *Cluster
	srv     *http.Server
	mu      sync.Mutex
	stopped bool
}

// StartAgentControl serves an AgentControl for c's agent.
func StartAgentControl(c *Cluster) (*AgentControl, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the agent control: %w", err)
	}
	a := &AgentControl{URL: "http://" + ln.Addr().String(), cluster: c}
	mux := http.NewServeMux()
	for path, op := range map[string]func(context.Context) error{
		"POST /stop":    a.stop,
		"POST /start":   a.start,
		"POST /restart": a.restart,
	} {
		mux.HandleFunc(path, a.handle(op))
	}
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// Close stops serving; an agent it stopped stays stopped.
func (a *AgentControl) Close() error {
	return a.srv.Close()
}

func (a *AgentControl) handle(op func(context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		// Not the request's context: an agent half started is worse than
		// a late answer.
		ctx, cancel := context.WithTimeout(context.Background(), agentControlTimeout)
		defer cancel()
		if err := op(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

func (a *AgentControl) restart(ctx context.Context) error {
	if err := a.stop(ctx); err != nil {
		return err
	}
	return a.start(ctx)
}

// stop stops the agent (a no-op when it is stopped).
func (a *AgentControl) stop(_ context.Context) error {
	c := a.cluster
	switch {
	case c.Nodelet != nil:
		if err := c.Nodelet.Stop(); err != nil {
			return fmt.Errorf("stopping nodelet: %w", err)
		}
	case c.Kubelet != nil:
		// Supervision ends with it: the agent runs when the specs say.
		c.Kubelet.Terminate()
	}
	a.stopped = true
	return nil
}

// start starts the agent again and waits until it is healthy.
func (a *AgentControl) start(ctx context.Context) error {
	c := a.cluster
	if !a.stopped {
		return errors.New("starting the agent: it was not stopped")
	}
	switch {
	case c.Nodelet != nil:
		if err := c.Nodelet.Restart(ctx); err != nil {
			return err
		}
	case c.Kubelet != nil:
		if err := c.Kubelet.Restart(); err != nil {
			return err
		}
		if err := c.Kubelet.WaitHealthy(ctx, kubeletStartTimeout); err != nil {
			return err
		}
	}
	a.stopped = false
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(agentSettle):
	}
	return nil
}
