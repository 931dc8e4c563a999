package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/hollow"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// hollowBenchEnv must be set for the hollow-node benchmarks to run:
	// they take several minutes per size.
	hollowBenchEnv = "NODELET_BENCH_HOLLOW"
	// hollowSizesEnv overrides hollowSizes ("100,500").
	hollowSizesEnv = "NODELET_BENCH_HOLLOW_NODES"
	// kubemarkNodesEnv overrides kubemarkNodes.
	kubemarkNodesEnv = "NODELET_BENCH_KUBEMARK_NODES"
	// hollowRestEnv overrides hollowRestWindow (a Go duration).
	hollowRestEnv = "NODELET_BENCH_HOLLOW_REST"

	// hollowPodsPerNode is how many pods every node runs.
	hollowPodsPerNode = 10
	// kubemarkNodes is how many hollow kubelets run: each is a process.
	kubemarkNodes = 10
	// hollowBaselineWindow is how long the API server is measured alone.
	hollowBaselineWindow = 20 * time.Second
	// hollowSettle is the pause between the pods running and the window at
	// rest: the last status writes and events of the start land.
	hollowSettle = 15 * time.Second
	// hollowRestWindow is how long the nodes are measured at rest: six
	// lease renewals and node status checks of a default configuration.
	hollowRestWindow = time.Minute
	// hollowPoll is how often the benchmark looks for the nodes or pods it
	// waits for; its own requests are taken out of the figures.
	hollowPoll = 2 * time.Second
	// hollowCreateWorkers create the pods in parallel.
	hollowCreateWorkers = 32
	// hollowStartTimeout bounds all nodes turning Ready and all pods
	// running, hollowRolloutTimeout the rollout; both grow with the size.
	hollowStartTimeout   = 3 * time.Minute
	hollowRolloutTimeout = 3 * time.Minute
)

// hollowAgents are the node agents of one run: hollow nodelets in this
// process or hollow kubelets (kubemark) as processes.
type hollowAgents interface {
	// start runs one agent per node name against api.
	start(ctx context.Context, api *utils.APIServer, names []string) error
	// rss is the resident memory of the agents, in bytes.
	rss() (uint64, error)
	// stop stops them.
	stop()
}

// skipUnlessHollow skips a hollow-node benchmark unless hollowBenchEnv is
// set, and silences the in-process agents' logs.
func skipUnlessHollow(b *testing.B) {
	b.Helper()
	if os.Getenv(hollowBenchEnv) == "" {
		b.Skipf("runs hundreds of hollow nodes for minutes; set %s=1", hollowBenchEnv)
	}
	hollowQuiet.Do(func() { ctrllog.SetLogger(logr.Discard()) })
}

var hollowQuiet sync.Once

// hollowSizes are the fleet sizes of BenchmarkHollowNodelet.
func hollowSizes(b *testing.B) []int {
	b.Helper()
	spec := os.Getenv(hollowSizesEnv)
	if spec == "" {
		return []int{100, 500}
	}
	var sizes []int
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want sizes like 100,500", hollowSizesEnv, spec)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// envDuration is the duration in env, or def.
func envDuration(b *testing.B, env string, def time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", env, v, err)
	}
	return d
}

// BenchmarkHollowNodelet measures what a nodelet node costs the API
// server with 100 and 500 hollow nodes (NODELET_BENCH_HOLLOW_NODES) in this
// process, 10 pods each, at rest and while every pod is replaced.
func BenchmarkHollowNodelet(b *testing.B) {
	skipUnlessHollow(b)
	for _, n := range hollowSizes(b) {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				runHollow(b, "nodelet (hollow, in one process)", &inProcess{}, n)
			}
		})
	}
}

// BenchmarkHollowKubemark measures the kubelet the same way: kubemark's
// hollow kubelets, one process each, built from the pinned Kubernetes.
func BenchmarkHollowKubemark(b *testing.B) {
	skipUnlessHollow(b)
	n := kubemarkNodes
	if v := os.Getenv(kubemarkNodesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("%s=%q: want a number of nodes", kubemarkNodesEnv, v)
		}
	}
	bin, err := utils.RunHackScript(b.Context(), os.Stderr, "k8s-binary.sh", "kubemark")
	if err != nil {
		b.Fatalf("building kubemark: %v", err)
	}
	b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
		for b.Loop() {
			runHollow(b, "kubelet (kubemark hollow-node, a process each)", &kubemark{bin: bin, dir: b.TempDir()}, n)
		}
	})
}

// hollowRun is one measurement's figures.
type hollowRun struct {
	agent            string
	nodes            int
	load             string
	startup          time.Duration
	rest, rollout    apiWindow
	rssBefore, rssAt uint64
	rssErr           error
}

// runHollow starts an API server, measures it alone, starts one agent
// per node, runs hollowPodsPerNode pods on each, measures a window at rest
// and a rollout that replaces every pod, and prints the figures per node.
//
// Nothing else talks to the API server: envtest runs no controller-manager
// or scheduler (the pods are bound by spec.nodeName and replaced by the
// benchmark itself), the benchmark's own requests are counted on its side
// (tallyTransport) and taken out, and so is the API server's traffic to
// itself, measured before any node starts.
func runHollow(b *testing.B, agent string, agents hollowAgents, n int) {
	ctx := b.Context()
	run := hollowRun{agent: agent, nodes: n, load: loadAverage()}
	api, err := utils.StartAPIServer(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = api.Stop() }()
	own := &tallyTransport{}
	cfg := own.tallied(api.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	scrape := func() apiSnapshot {
		b.Helper()
		var s apiSnapshot
		err := retry(ctx, func() (err error) {
			s, err = scrapeMetrics(ctx, hc, cfg.Host)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}

	// The API server alone.
	time.Sleep(5 * time.Second)
	s0 := scrape()
	time.Sleep(hollowBaselineWindow)
	base := between(s0, scrape())

	for _, ns := range []string{"hollow-a", "hollow-b"} {
		if err := createNamespace(ctx, cs, ns); err != nil {
			b.Fatal(err)
		}
	}
	names := hollow.NodeNames("hollow", n)
	run.rssBefore, _ = agents.rss()
	start := time.Now()
	defer agents.stop()
	if err := agents.start(ctx, api, names); err != nil {
		b.Fatal(err)
	}
	scaled := func(d time.Duration) time.Duration { return d + time.Duration(n)*d/200 }
	if err := waitFor(ctx, scaled(hollowStartTimeout), func() (bool, string, error) { return nodesReady(ctx, cs, n) }); err != nil {
		b.Fatalf("waiting for %d nodes to be Ready: %v", n, err)
	}
	if err := createPods(ctx, cs, "hollow-a", names); err != nil {
		b.Fatal(err)
	}
	if err := waitFor(ctx, scaled(hollowStartTimeout), func() (bool, string, error) { return allRunning(ctx, cs, "hollow-a") }); err != nil {
		b.Fatalf("waiting for the pods to run: %v", err)
	}
	run.startup = time.Since(start)

	// At rest.
	time.Sleep(hollowSettle)
	own.take()
	s1 := scrape()
	time.Sleep(envDuration(b, hollowRestEnv, hollowRestWindow))
	run.rest = between(s1, scrape()).minus(base, own.take())
	run.rssAt, run.rssErr = agents.rss()

	// A rollout: every pod deleted, a new one created on every node.
	s2 := scrape()
	if err := retry(ctx, func() error {
		return cs.CoreV1().Pods("hollow-a").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}); err != nil {
		b.Fatal(err)
	}
	if err := createPods(ctx, cs, "hollow-b", names); err != nil {
		b.Fatal(err)
	}
	err = waitFor(ctx, scaled(hollowRolloutTimeout), func() (bool, string, error) {
		gone, why, err := noPods(ctx, cs, "hollow-a")
		if err != nil || !gone {
			return false, why, err
		}
		return allRunning(ctx, cs, "hollow-b")
	})
	if err != nil {
		b.Fatalf("waiting for the rollout: %v", err)
	}
	run.rollout = between(s2, scrape()).minus(base, own.take())
	printHollow(b, run)
}

// retries and retryPause bound retry.
const (
	retries    = 5
	retryPause = 2 * time.Second
)

// retry calls f until it succeeds, at most retries times: on a machine
// loaded by other work, a connection to the API server may be lost.
func retry(ctx context.Context, f func() error) error {
	var err error
	for range retries {
		if err = f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retryPause):
		}
	}
	return err
}

// waitFor polls done every hollowPoll until it is true, fails or timeout
// passes; the error then says what done said last.
func waitFor(ctx context.Context, timeout time.Duration, done func() (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, why, err := done()
		if err != nil {
			why = err.Error() // lost connections pass; the deadline bounds them
		}
		if ok && err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %v: %s", timeout, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(hollowPoll):
		}
	}
}

func createNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the default service account of %s: %w", name, err)
	}
	return nil
}

// nodesReady says whether n nodes are Ready.
func nodesReady(ctx context.Context, cs kubernetes.Interface, n int) (bool, string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	ready := 0
	for i := range list.Items {
		if utils.NodeReady(&list.Items[i]) {
			ready++
		}
	}
	return ready >= n, fmt.Sprintf("%d of %d nodes registered, %d Ready", len(list.Items), n, ready), nil
}

// createPods creates hollowPodsPerNode pods bound to each node in ns. They
// tolerate the hollow nodes' taint, which nodelet's admission enforces on
// bound pods too (the hollow kubelets register untainted).
func createPods(ctx context.Context, cs kubernetes.Interface, ns string, nodes []string) error {
	pods := make(chan *corev1.Pod)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range hollowCreateWorkers {
		wg.Go(func() {
			for p := range pods {
				err := retry(ctx, func() error {
					_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
					if apierrors.IsAlreadyExists(err) {
						return nil
					}
					return err
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("creating pod %s/%s: %w", ns, p.Name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, node := range nodes {
		for i := range hollowPodsPerNode {
			p := utils.BusyboxPod(ns, fmt.Sprintf("%s-%d", node, i), node, "sleep", "3600")
			p.Spec.Tolerations = append(p.Spec.Tolerations, hollow.Toleration())
			pods <- p
		}
	}
	close(pods)
	wg.Wait()
	return errors.Join(errs...)
}

// allRunning says whether no pod of ns is not Running: one page of one
// pod answers it, whatever the number of pods.
func allRunning(ctx context.Context, cs kubernetes.Interface, ns string) (bool, string, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermNotEqualSelector("status.phase", string(corev1.PodRunning)).String(),
		Limit:         1,
	})
	if err != nil {
		return false, "", err
	}
	if len(list.Items) == 0 {
		return true, "", nil
	}
	p := list.Items[0]
	return false, fmt.Sprintf("pod %s on %s is %s", p.Name, p.Spec.NodeName, p.Status.Phase), nil
}

// noPods says whether ns has no pods left.
func noPods(ctx context.Context, cs kubernetes.Interface, ns string) (bool, string, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return false, "", err
	}
	if len(list.Items) == 0 {
		return true, "", nil
	}
	left := 1
	if r := list.RemainingItemCount; r != nil {
		left += int(*r)
	}
	return false, fmt.Sprintf("%d old pods left", left), nil
}

// loadAverage is the machine's load average, from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// rssOf is the resident memory of process pid ("self" for this one), in
// bytes.
func rssOf(pid string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%s/status", pid)
}

// printHollow prints run's figures per node, and its requests by verb and
// resource.
func printHollow(b *testing.B, r hollowRun) {
	b.Helper()
	n := float64(r.nodes)
	perSec := func(v float64, d time.Duration) float64 { return v / n / d.Seconds() }
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%s: %d nodes × %d pods, one envtest API server (load average at start %s; all Ready and running after %v)\n",
		r.agent, r.nodes, hollowPodsPerNode, r.load, r.startup.Round(time.Second))
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "per node\tat rest (%v)\trollout (%v)\t\n", r.rest.dur.Round(time.Second), r.rollout.dur.Round(time.Second))
	fmt.Fprintf(tw, "API requests/s\t%.3f\t%.3f\t\n", perSec(total(r.rest.requests), r.rest.dur), perSec(total(r.rollout.requests), r.rollout.dur))
	// kubemark's hollow kubelet records its Events nowhere (a fake
	// recorder): compare without them too.
	fmt.Fprintf(tw, "… without Events\t%.3f\t%.3f\t\n", perSec(withoutEvents(r.rest.requests), r.rest.dur), perSec(withoutEvents(r.rollout.requests), r.rollout.dur))
	fmt.Fprintf(tw, "open watches\t%.1f\t%.1f\t\n", r.rest.watches/n, r.rollout.watches/n)
	resources := slices.Sorted(maps.Keys(r.rest.watchesBy))
	for _, k := range slices.Sorted(maps.Keys(r.rollout.watchesBy)) {
		if !slices.Contains(resources, k) {
			resources = append(resources, k)
		}
	}
	for _, k := range resources {
		fmt.Fprintf(tw, "… of %s\t%.1f\t%.1f\t\n", k, r.rest.watchesBy[k]/n, r.rollout.watchesBy[k]/n)
	}
	fmt.Fprintf(tw, "bytes received/s (responses)\t%.0f\t%.0f\t\n", perSec(total(r.rest.bytes), r.rest.dur), perSec(total(r.rollout.bytes), r.rollout.dur))
	fmt.Fprintf(tw, "bytes received/s (watch events)\t%.0f\t%.0f\t\n", perSec(r.rest.watchBytes, r.rest.dur), perSec(r.rollout.watchBytes, r.rollout.dur))
	fmt.Fprintf(tw, "bytes received (total in window)\t%.0f\t%.0f\t\n", (total(r.rest.bytes)+r.rest.watchBytes)/n, (total(r.rollout.bytes)+r.rollout.watchBytes)/n)
	if r.rssErr == nil {
		fmt.Fprintf(tw, "RSS (MiB)\t%.1f\t\t\n", float64(r.rssAt-min(r.rssBefore, r.rssAt))/n/(1<<20))
	}
	_ = tw.Flush()
	fmt.Fprintf(&sb, "\nrequests/s per node by verb and resource\n")
	tw = tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "verb resource\tat rest\trollout\trollout bytes/req\t\n")
	keys := map[reqKey]bool{}
	for k := range r.rest.requests {
		keys[k] = true
	}
	for k := range r.rollout.requests {
		keys[k] = true
	}
	sorted := slices.SortedFunc(maps.Keys(keys), func(a, c reqKey) int { return strings.Compare(a.String(), c.String()) })
	for _, k := range sorted {
		perReq := 0.0
		if c := r.rollout.requests[k]; c > 0 {
			perReq = r.rollout.bytes[k] / c
		}
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.0f\t\n", k, perSec(r.rest.requests[k], r.rest.dur), perSec(r.rollout.requests[k], r.rollout.dur), perReq)
	}
	_ = tw.Flush()
	fmt.Print(sb.String())
	b.ReportMetric(perSec(total(r.rest.requests), r.rest.dur), "req/s/node-rest")
	b.ReportMetric(perSec(total(r.rollout.requests), r.rollout.dur), "req/s/node-rollout")
	b.ReportMetric(r.rest.watches/n, "watches/node")
}

// withoutEvents sums the requests of m that are not about Events.
func withoutEvents(m map[reqKey]float64) float64 {
	s := 0.0
	for k, v := range m {
		if k.resource != "events" {
			s += v
		}
	}
	return s
}

// inProcess runs hollow nodelets in this process, each authenticated as
// its own node.
type inProcess struct {
	root   string
	cancel context.CancelFunc
	done   chan error
}

func (p *inProcess) start(ctx context.Context, api *utils.APIServer, names []string) error {
	root, err := os.MkdirTemp("", "nodelet-hollow-")
	if err != nil {
		return err
	}
	fleet, err := hollow.New(hollow.Options{Nodes: names, RootDir: root, Credentials: api.NodeUserConfig})
	if err != nil {
		_ = os.RemoveAll(root)
		return err
	}
	p.root = root
	ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.done = make(chan error, 1)
	go func() { p.done <- fleet.Run(ctx) }()
	return nil
}

func (p *inProcess) rss() (uint64, error) { return rssOf("self") }

func (p *inProcess) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	select {
	case err := <-p.done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "hollow nodes stopped with errors: %v\n", err)
		}
	case <-time.After(time.Minute):
	}
	_ = os.RemoveAll(p.root)
}

// kubemark runs one hollow kubelet process per node (kubemark --morph
// kubelet, fake runtime and fake image service).
type kubemark struct {
	bin, dir string
	procs    []*exec.Cmd
	// before are what kubemarkLeftovers matched before the start.
	before []string
}

// kubemarkLeftovers are what hollow kubelets leave in /tmp (a fixed
// place, whatever $TMPDIR says): their fake runtimes' sockets and their
// state directories.
var kubemarkLeftovers = []string{"/tmp/kubelet_remote_*.sock", "/tmp/hollow-kubelet.*"}

func globAll(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

func (k *kubemark) start(_ context.Context, api *utils.APIServer, names []string) error {
	k.before = globAll(kubemarkLeftovers)
	for _, name := range names {
		cfg, err := api.NodeUserConfig(name)
		if err != nil {
			return err
		}
		kc := filepath.Join(k.dir, name+".kubeconfig")
		if err := utils.WriteKubeconfig(kc, cfg, "system:node:"+name); err != nil {
			return err
		}
		port, err := freePort()
		if err != nil {
			return err
		}
		logf, err := os.Create(filepath.Join(k.dir, name+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(k.bin, "--morph=kubelet", "--name="+name, "--kubeconfig="+kc,
			"--kubelet-port="+strconv.Itoa(port), "--kubelet-read-only-port=0",
			"--use-host-image-service=false", "--v=0")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		_ = logf.Close()
		if err != nil {
			return fmt.Errorf("starting hollow kubelet %s: %w", name, err)
		}
		k.procs = append(k.procs, cmd)
	}
	return nil
}

func (k *kubemark) rss() (uint64, error) {
	var sum uint64
	for _, c := range k.procs {
		r, err := rssOf(strconv.Itoa(c.Process.Pid))
		if err != nil {
			return 0, err
		}
		sum += r
	}
	return sum, nil
}

func (k *kubemark) stop() {
	for _, c := range k.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range k.procs {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	for _, p := range globAll(kubemarkLeftovers) {
		if !slices.Contains(k.before, p) {
			_ = os.RemoveAll(p)
		}
	}
}

// freePort returns a TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
