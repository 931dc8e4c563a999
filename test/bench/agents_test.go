package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/utils"
)

// agent is one node agent under measurement, run for benchNode on the
// benchmark's API server and containerd. The same measurement code runs
// against each kind; only one agent runs at a time.
type agent interface {
	// name is the agent's column in the tables.
	name() string
	// pid is the agent's process, whose /proc the usage is read from.
	pid() int
	// goMemory returns the Go runtime's heap in use and total (sys) from
	// the agent's metrics; ok is false when the agent does not serve
	// them to the benchmark.
	goMemory() (heapInuse, sys int64, ok bool)
	// runtimeCalls returns the CRI calls the agent has made
	// (kubelet_runtime_operations_total, which both agents serve); ok is
	// false when it cannot be read.
	runtimeCalls() (calls float64, ok bool)
	// logTail is the end of the agent's log, for failures.
	logTail(lines int) string
	// kill ends the agent's process with sig (SIGKILL: a crash) and
	// waits for it to be gone, leaving its pods running in the runtime;
	// start starts it again on the same directory and configuration and
	// returns once its health endpoint answers.
	kill(sig syscall.Signal) error
	start(ctx context.Context) error
	// stop ends the agent, removes what it left in the runtime and its
	// directory. Stopping twice is harmless.
	stop()
}

const (
	nodeletAgentName = "nodelet"
	kubeletAgentName = "kubelet"
	// benchClusterDNS is the cluster DNS address both agents write into
	// pods' resolv.conf: nothing answers there, no benchmark pod resolves
	// names, and without one the kubelet records a warning Event for
	// every pod sync.
	benchClusterDNS = "10.96.0.10"
	// agentStopTimeout bounds clearing the runtime after an agent: 250
	// pods on a busy machine take more than two minutes.
	agentStopTimeout = 5 * time.Minute
)

// sharedAgentSettings are the configuration fields both agents get, under
// the same names in the kubelet's KubeletConfiguration and nodelet's
// NodeletConfiguration: room for the scale curve's largest point, no QoS or
// pod cgroups (the kubelet cannot make them on this machine kind), image
// pulls in parallel (none happens: the image is local), image garbage
// collection off, eviction only when the machine is really short, and the
// same cluster DNS.
func (c *cluster) sharedAgentSettings() map[string]any {
	return map[string]any{
		"maxPods":                     c.maxPods,
		"cgroupsPerQOS":               false,
		"serializeImagePulls":         false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
		"clusterDNS":    []string{benchClusterDNS},
		"clusterDomain": "cluster.local",
	}
}

// agentDifferences are the settings that differ between the two agents in
// BenchmarkSideBySide, for the table's footer.
var agentDifferences = []string{
	"cgroups: nodelet's pods under the harness's cgroupRoot (a directory of /nodelet-e2e), the kubelet's under its default; neither makes QoS or pod cgroups (cgroupsPerQOS false)",
	"the kubelet runs cAdvisor, which watches every cgroup of the machine (other work included); nodelet reads what it needs from the CRI",
	"the harness's kubelet settings: failCgroupV1 false, enforceNodeAllocatable [], failSwapOn false; its API allows anonymous requests (the benchmark reads its /metrics), nodelet's serves /metrics on a port of its own",
	"log verbosity 0 for both (the harness runs the kubelet at 2 otherwise)",
}

// nodeletAgent is nodelet as an agent.
type nodeletAgent struct {
	n      *utils.Nodelet
	stopFn func()
}

// startNodeletAgent starts nodelet with sharedAgentSettings and waits for
// its Node to be Ready.
func (c *cluster) startNodeletAgent(b *testing.B, label string) agent {
	b.Helper()
	n, stop := c.startNodeletWith(b, label, c.sharedAgentSettings())
	return &nodeletAgent{n: n, stopFn: stop}
}

func (a *nodeletAgent) name() string             { return nodeletAgentName }
func (a *nodeletAgent) pid() int                 { return a.n.PID() }
func (a *nodeletAgent) logTail(lines int) string { return a.n.LogTail(lines) }
func (a *nodeletAgent) stop()                    { a.stopFn() }

func (a *nodeletAgent) kill(sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return a.n.Kill()
	}
	return a.n.Stop()
}

func (a *nodeletAgent) start(ctx context.Context) error { return a.n.Restart(ctx) }

func (a *nodeletAgent) goMemory() (heapInuse, sys int64, ok bool) {
	m, err := nodeletMetrics(a.n)
	if err != nil {
		return 0, 0, false
	}
	return int64(m["go_memstats_heap_inuse_bytes"]), int64(m["go_memstats_sys_bytes"]), true
}

func (a *nodeletAgent) runtimeCalls() (float64, bool) {
	m, err := nodeletMetrics(a.n)
	if err != nil {
		return 0, false
	}
	v, ok := m[runtimeOperationsMetric]
	return v, ok
}

// runtimeOperationsMetric counts an agent's CRI calls, under the kubelet's
// name in both agents.
const runtimeOperationsMetric = "kubelet_runtime_operations_total"

// kubeletAgent is the real kubelet of the pinned version as an agent.
type kubeletAgent struct {
	k     *utils.Kubelet
	proc  int
	clear func() error
	b     *testing.B
	once  sync.Once
	label string
}

// startKubeletAgent starts the kubelet (built by hack/kubelet.sh, cached)
// with sharedAgentSettings and waits for its Node to be Ready.
// clearRuntime removes what it leaves in the runtime when it stops.
func (c *cluster) startKubeletAgent(b *testing.B, label string, clearRuntime func() error) agent {
	b.Helper()
	cfg := c.sharedAgentSettings()
	// Its /metrics open to the benchmark, for the Go runtime's numbers.
	cfg["authentication"] = map[string]any{
		"anonymous": map[string]any{"enabled": true},
		"webhook":   map[string]any{"enabled": false},
	}
	cfg["authorization"] = map[string]any{"mode": "AlwaysAllow"}
	k, err := utils.StartKubelet(b.Context(), utils.KubeletOptions{
		NodeName:   benchNode,
		API:        c.api,
		Containerd: c.ctrd,
		Config:     cfg,
		Args:       []string{"--v=0"},
	})
	a := &kubeletAgent{k: k, clear: clearRuntime, b: b, label: label}
	if k != nil {
		b.Cleanup(a.stop)
	}
	if err != nil {
		b.Fatalf("starting the kubelet: %v", err)
	}
	c.waitNodeReady(b, "kubelet", k.LogTail)
	if a.proc, err = processNamed(k.Dir, "kubelet"); err != nil {
		b.Fatalf("finding the kubelet's process: %v", err)
	}
	return a
}

func (a *kubeletAgent) name() string             { return kubeletAgentName }
func (a *kubeletAgent) pid() int                 { return a.proc }
func (a *kubeletAgent) logTail(lines int) string { return a.k.LogTail(lines) }

func (a *kubeletAgent) kill(sig syscall.Signal) error { return a.k.Kill(sig) }

func (a *kubeletAgent) start(ctx context.Context) error {
	if err := a.k.Restart(); err != nil {
		return err
	}
	if err := a.k.WaitHealthy(ctx, nodeReadyTimeout); err != nil {
		return err
	}
	proc, err := processNamed(a.k.Dir, "kubelet")
	if err != nil {
		return fmt.Errorf("finding the kubelet's process: %w", err)
	}
	a.proc = proc
	return nil
}

func (a *kubeletAgent) goMemory() (heapInuse, sys int64, ok bool) {
	m, err := kubeletMetrics(a.k.ServerAddr)
	if err != nil {
		return 0, 0, false
	}
	return int64(m["go_memstats_heap_inuse_bytes"]), int64(m["go_memstats_sys_bytes"]), true
}

func (a *kubeletAgent) runtimeCalls() (float64, bool) {
	m, err := kubeletMetrics(a.k.ServerAddr)
	if err != nil {
		return 0, false
	}
	v, ok := m[runtimeOperationsMetric]
	return v, ok
}

// kubeletMetrics scrapes the kubelet's /metrics on its API (anonymous
// requests allowed; its serving certificate is self-signed).
func kubeletMetrics(addr string) (map[string]float64, error) {
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the kubelet's self-signed certificate on loopback
	}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping kubelet metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping kubelet metrics: %s", resp.Status)
	}
	out, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading kubelet metrics: %w", err)
	}
	return out, nil
}

// stop ends the kubelet, then removes the sandboxes it kept, then its
// directory and mounts.
func (a *kubeletAgent) stop() {
	a.once.Do(func() {
		keepLog(a.b, a.k.LogPath, "kubelet-"+a.label)
		a.k.Terminate()
		if err := a.clear(); err != nil {
			a.b.Errorf("clearing the kubelet's sandboxes: %v", err)
		}
		if err := removeLinksInto(kubeletContainerLogLinks, a.k.Dir); err != nil {
			a.b.Errorf("removing the kubelet's container log links: %v", err)
		}
		if err := a.k.Stop(); err != nil {
			a.b.Errorf("stopping the kubelet: %v", err)
		}
	})
}

// kubeletContainerLogLinks is where the kubelet links each container's
// log (not configurable); it removes a link with its container, and the
// containers it had not collected yet go with the runtime's clearing.
const kubeletContainerLogLinks = "/var/log/containers"

// removeLinksInto removes the symbolic links in dir that point under
// target.
func removeLinksInto(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		to, err := os.Readlink(path)
		if err != nil || !strings.HasPrefix(to, target+string(filepath.Separator)) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// processNamed finds the process with an argument under dir whose command
// name is comm: the kubelet, which its wrapper scripts exec.
func processNamed(dir, comm string) (int, error) {
	pids, err := utils.ProcessesUnder(dir)
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && string(bytes.TrimSpace(name)) == comm {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process %q with arguments under %s among %v", comm, dir, pids)
}

// forgetNode removes what an agent left in the API and the runtime, so
// that the next agent starts as on a new machine: pods still bound to the
// node (force-deleted), the Node and its Lease, and every sandbox.
func (c *cluster) forgetNode(ctx context.Context, floor *criFloor) error {
	var errs []error
	pods, err := c.admin.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + benchNode})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing the node's pods: %w", err))
	} else {
		for _, p := range pods.Items {
			err := c.admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err))
			}
		}
	}
	if err := c.admin.CoreV1().Nodes().Delete(ctx, benchNode, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting node %s: %w", benchNode, err))
	}
	err = c.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, benchNode, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting the lease of %s: %w", benchNode, err))
	}
	if err := floor.clearRuntime(ctx); err != nil {
		errs = append(errs, err)
	}
	// The next agent must not find the old Node Ready.
	deadline := time.Now().Add(agentStopTimeout)
	for {
		_, err := c.admin.CoreV1().Nodes().Get(ctx, benchNode, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("node %s still there after %s", benchNode, agentStopTimeout))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// apiRequests scrapes the API server's request counters
// (apiserver_request_total, summed, and per verb as "/VERB"): with one
// agent running, their growth is the agent's requests plus the
// benchmark's own and the API server's few of its own.
func (c *cluster) apiRequests(ctx context.Context) (map[string]float64, error) {
	raw, err := c.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	all, err := parseMetrics(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := map[string]float64{}
	for k, v := range all {
		if rest, ok := strings.CutPrefix(k, apiRequestsMetric); ok && (rest == "" || rest[0] == '/') {
			out[rest] = v
		}
	}
	return out, nil
}

// apiRequestsMetric counts the API server's requests by verb, resource and
// code.
const apiRequestsMetric = "apiserver_request_total"

// agentRequests is how many requests, in total and per verb, the agent made
// between two readings of apiRequests, less the benchmark's own (own, per
// verb, "" for the total) and the scrape that took the first reading (a
// GET, counted once its response was written).
func agentRequests(before, after, own map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		d := v - before[k] - own[k]
		if k == "" || k == "/GET" {
			d-- // the first scrape
		}
		if d > 0 {
			out[k] = d
		}
	}
	return out
}
