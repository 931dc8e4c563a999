package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// benchNode is the node every benchmark's nodelet runs.
	benchNode = "bench-node"
	// nodeReadyTimeout bounds the nodelet registering its Node as Ready.
	nodeReadyTimeout = 2 * time.Minute
	// podsTimeout bounds a whole phase of a benchmark (all pods Ready, all
	// pods gone): far above any useful result, it only stops a hung run.
	podsTimeout = 5 * time.Minute
	// logDirEnv names a directory the nodelet logs are copied to before the
	// benchmark removes them, to look into a missed target afterwards.
	logDirEnv = "NODELET_BENCH_LOG_DIR"
	// nodeletEnvEnv adds variables to every benchmarked nodelet's
	// environment and to no other process (space-separated KEY=value, say
	// "GOGC=25 GOMEMLIMIT=24MiB"), to measure a runtime setting without
	// changing the benchmark's own process.
	nodeletEnvEnv = "NODELET_BENCH_NODELET_ENV"
)

var quietLogger sync.Once

// cluster is a containerd and an API server, private to one benchmark.
type cluster struct {
	ctrd  *utils.Containerd
	api   *utils.APIServer
	admin kubernetes.Interface
	// maxPods is the agents' maxPods (sharedAgentSettings).
	maxPods int
}

// startCluster starts containerd and the API server and stops them when
// the benchmark ends; the agents get maxPods scaleMaxPods.
func startCluster(b *testing.B) *cluster {
	b.Helper()
	return startClusterFor(b, scaleMaxPods)
}

// spareAddresses are pod addresses beyond maxPods in the runtime's
// subnet: for sandboxes on their way out while the next pods come.
const spareAddresses = 3

// startClusterFor is startCluster for agents of maxPods pods: the runtime
// gets a pod subnet that holds them.
func startClusterFor(b *testing.B, maxPods int) *cluster {
	b.Helper()
	// envtest logs through controller-runtime's logger; without one set
	// it prints a warning with a stack trace.
	quietLogger.Do(func() { ctrllog.SetLogger(logr.Discard()) })
	ctx := b.Context()
	ctrd, err := utils.StartContainerd(ctx, utils.ContainerdOptions{PodAddresses: maxPods + spareAddresses})
	if err != nil {
		b.Fatalf("starting containerd: %v", err)
	}
	b.Cleanup(func() {
		if err := ctrd.Stop(); err != nil {
			b.Errorf("stopping containerd: %v", err)
		}
	})
	api, err := utils.StartAPIServer(ctx)
	if err != nil {
		b.Fatalf("starting the API server: %v", err)
	}
	b.Cleanup(func() {
		if err := api.Stop(); err != nil {
			b.Errorf("stopping the API server: %v", err)
		}
	})
	// client-go limits a client to 5 requests a second by default, which
	// would make the benchmark measure its own client.
	cfg := rest.CopyConfig(api.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatalf("creating the admin clientset: %v", err)
	}
	return &cluster{ctrd: ctrd, api: api, admin: admin, maxPods: maxPods}
}

// startNodelet runs a nodelet for benchNode with the default configuration
// and waits until its Node is Ready. The returned stop function stops it
// (also registered with b.Cleanup; stopping twice is harmless).
func (c *cluster) startNodelet(b *testing.B, label string) (*utils.Nodelet, func()) {
	b.Helper()
	return c.startNodeletWith(b, label, nil)
}

// startNodeletWith is startNodelet with configuration fields on top of the
// defaults.
func (c *cluster) startNodeletWith(b *testing.B, label string, cfg map[string]any) (*utils.Nodelet, func()) {
	b.Helper()
	// NODELET_BENCH_PROFILE=1 serves /debug/pprof on nodelet's metrics
	// address, to profile a burst from outside; NODELET_BENCH_PROFILE_DIR
	// also saves the profiles of the benchmark's windows (profile_test.go).
	if profilingWanted() {
		cfg = maps.Clone(cfg)
		if cfg == nil {
			cfg = map[string]any{}
		}
		cfg["enableProfilingHandler"] = true
	}
	env, err := nodeletEnv()
	if err != nil {
		b.Fatal(err)
	}
	n, err := utils.StartNodelet(b.Context(), utils.NodeletOptions{NodeName: benchNode, API: c.api, Containerd: c.ctrd, Config: cfg, Env: env})
	if err != nil {
		b.Fatalf("starting nodelet: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			keepLog(b, n.LogPath, "nodelet-"+label)
			if err := n.Cleanup(); err != nil {
				b.Errorf("stopping nodelet: %v", err)
			}
		})
	}
	b.Cleanup(stop)
	c.waitNodeReady(b, "nodelet", n.LogTail)
	return n, stop
}

// nodeletEnv returns the KEY=value pairs of $NODELET_BENCH_NODELET_ENV.
func nodeletEnv() ([]string, error) {
	fields := strings.Fields(os.Getenv(nodeletEnvEnv))
	for _, f := range fields {
		if k, _, ok := strings.Cut(f, "="); !ok || k == "" {
			return nil, fmt.Errorf("$%s: %q is not KEY=value", nodeletEnvEnv, f)
		}
	}
	return fields, nil
}

// waitNodeReady waits until benchNode is Ready; logTail is the agent's
// log, shown when it is not.
func (c *cluster) waitNodeReady(b *testing.B, agent string, logTail func(int) string) {
	b.Helper()
	deadline := time.Now().Add(nodeReadyTimeout)
	for {
		node, err := c.admin.CoreV1().Nodes().Get(b.Context(), benchNode, metav1.GetOptions{})
		if err == nil && utils.NodeReady(node) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("node %s not Ready after %s (last error %v); %s log:\n%s", benchNode, nodeReadyTimeout, err, agent, logTail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keepLog copies an agent's log to $NODELET_BENCH_LOG_DIR when set.
func keepLog(b *testing.B, path, label string) {
	dir := os.Getenv(logDirEnv)
	if dir == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s.log", label, time.Now().Format("150405"))), data, 0o644)
	}
	if err != nil {
		b.Logf("keeping the %s log: %v", label, err)
	}
}

// newNamespace creates a namespace with the default service account that
// the API server's admission insists on.
func (c *cluster) newNamespace(b *testing.B, name string) string {
	b.Helper()
	admin, err := c.api.AdminClient()
	if err == nil {
		err = utils.CreateNamespace(b.Context(), admin, name)
	}
	if err != nil {
		b.Fatal(err)
	}
	return name
}

// sleeperPod is a pod bound to benchNode running busybox `sleep 3600`.
// busybox runs as PID 1 and ignores SIGTERM, so a deletion takes the whole
// grace period: one second.
func sleeperPod(ns, name string) *corev1.Pod {
	p := utils.BusyboxPod(ns, name, benchNode, "sleep", "3600")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return p
}

// podWatch records, from an informer on one namespace, when each pod was
// first seen Ready and when it was seen deleted, and, once expect was
// called, when it was first seen as expected.
type podWatch struct {
	mu      sync.Mutex
	ready   map[string]time.Time
	gone    map[string]time.Time
	want    func(*corev1.Pod) bool
	matched map[string]time.Time
	changed chan struct{}
	stop    chan struct{}
}

// watchPods starts an informer on the pods of ns and waits for its first
// list. The informer stops with the benchmark or with close().
func (c *cluster) watchPods(b *testing.B, ns string) *podWatch {
	b.Helper()
	w := &podWatch{
		ready:   map[string]time.Time{},
		gone:    map[string]time.Time{},
		changed: make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.admin, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: w.deleted,
	}); err != nil {
		b.Fatalf("watching pods: %v", err)
	}
	factory.Start(w.stop)
	b.Cleanup(w.close)
	for typ, ok := range factory.WaitForCacheSync(w.stop) {
		if !ok {
			b.Fatalf("the informer for %v did not sync", typ)
		}
	}
	return w
}

func (w *podWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
}

func (w *podWatch) observe(obj any) {
	now := time.Now()
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	ready := utils.PodReady(pod)
	if _, seen := w.ready[pod.Name]; !seen && ready {
		w.ready[pod.Name] = now
	}
	match := w.want != nil && w.want(pod)
	if _, seen := w.matched[pod.Name]; !seen && match {
		w.matched[pod.Name] = now
	}
	w.mu.Unlock()
	if ready || match {
		w.notify()
	}
}

// expect starts recording when each pod is first seen as want says, from
// the events that follow (matchedAt).
func (w *podWatch) expect(want func(*corev1.Pod) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want, w.matched = want, map[string]time.Time{}
}

func (w *podWatch) deleted(obj any) {
	now := time.Now()
	var name string
	switch o := obj.(type) {
	case *corev1.Pod:
		name = o.Name
	case cache.DeletedFinalStateUnknown:
		_, name, _ = cache.SplitMetaNamespaceKey(o.Key)
	default:
		return
	}
	w.mu.Lock()
	w.gone[name] = now
	w.mu.Unlock()
	w.notify()
}

func (w *podWatch) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// readyAt and goneAt return when a pod was seen Ready and deleted.
func (w *podWatch) readyAt(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.ready[name]
	return t, ok
}

func (w *podWatch) goneAt(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.gone[name]
	return t, ok
}

// matchedAt returns when a pod was first seen as expect wants.
func (w *podWatch) matchedAt(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.matched[name]
	return t, ok
}

// waitAll waits until every name is in the set that at picks (ready or
// gone) and returns the latest of their times, or how many are still
// missing when the timeout passes.
func (w *podWatch) waitAll(names []string, at func(string) (time.Time, bool), timeout time.Duration) (time.Time, int) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		var last time.Time
		missing := 0
		for _, n := range names {
			t, ok := at(n)
			if !ok {
				missing++
			} else if t.After(last) {
				last = t
			}
		}
		if missing == 0 {
			return last, 0
		}
		select {
		case <-w.changed:
		case <-deadline.C:
			return time.Time{}, missing
		}
	}
}

// forEach runs fn for 0..n-1 on workers goroutines and returns the first
// error.
func forEach(n, workers int, fn func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// deletePod deletes a pod with the default options; a pod already gone is
// fine.
func (c *cluster) deletePod(ctx context.Context, ns, name string) error {
	err := c.admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// methodLabel finds the HTTP method of client-go's request metrics.
var methodLabel = regexp.MustCompile(`[{,]method="([A-Z]+)"`)

// verbLabel finds the verb of the API server's request metrics.
var verbLabel = regexp.MustCompile(`[{,]verb="([A-Z]+)"`)

// controllerLabel finds the controller of controller-runtime's metrics.
var controllerLabel = regexp.MustCompile(`[{,]controller="([a-z]+)"`)

// nodeletMetrics scrapes the nodelet's Prometheus endpoint (see
// parseMetrics).
func nodeletMetrics(n *utils.Nodelet) (map[string]float64, error) {
	resp, err := http.Get("http://" + n.MetricsAddr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping nodelet metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping nodelet metrics: %s: %s", resp.Status, body)
	}
	out, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading nodelet metrics: %w", err)
	}
	return out, nil
}

// parseMetrics reads a Prometheus text page and returns each metric's
// value summed over its label sets, and for series with a method or verb
// label also summed per method, as "<name>/<METHOD>", and for series with
// a controller label per controller, as "<name>/<controller>".
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line+" ", "{ ")]
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		out[name] += v
		if m := methodLabel.FindStringSubmatch(line); m != nil {
			out[name+"/"+m[1]] += v
		} else if m := verbLabel.FindStringSubmatch(line); m != nil {
			out[name+"/"+m[1]] += v
		}
		if m := controllerLabel.FindStringSubmatch(line); m != nil {
			out[name+"/"+m[1]] += v
		}
	}
	return out, sc.Err()
}

// memSplit is a process's memory as /proc/<pid>/status tells it, in
// bytes: resident now (VmRSS) and at its peak (VmHWM), and the resident
// pages split into anonymous memory (heap, stacks: RssAnon), file pages
// (mostly its binary: RssFile) and shared memory (RssShmem).
type memSplit struct {
	rss, peak, anon, file, shmem int64
}

// readMemSplit reads memSplit for pid; zeros when it cannot.
func readMemSplit(pid int) memSplit {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memSplit{}
	}
	return parseMemSplit(string(data))
}

// parseMemSplit reads memSplit from the text of /proc/<pid>/status.
func parseMemSplit(status string) memSplit {
	var m memSplit
	for line := range strings.SplitSeq(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			m.rss = kb * 1024
		case "VmHWM":
			m.peak = kb * 1024
		case "RssAnon":
			m.anon = kb * 1024
		case "RssFile":
			m.file = kb * 1024
		case "RssShmem":
			m.shmem = kb * 1024
		}
	}
	return m
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// fmtDur prints seconds above one second, milliseconds below.
func fmtDur(d time.Duration) string {
	if d >= time.Second || d <= -time.Second {
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// row is one line of a result table; verdict is empty for lines without a
// target.
type row struct{ metric, value, target, verdict string }

// printTable writes a titled table to stdout, where `go test -bench` shows
// it next to the benchmark lines.
func printTable(title string, rows []row) {
	fmt.Println()
	fmt.Println(title)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "metric\tvalue\ttarget\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.metric, r.value, r.target, r.verdict)
	}
	_ = tw.Flush()
	fmt.Println()
}

// machine describes the host for table headers: the date, the CPU model,
// the cores this process may use and the one-minute load average (other
// work on the machine shows in every number).
func machine() string {
	return fmt.Sprintf("%s, %s, %d cores, load %s", time.Now().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), loadAverage())
}

const mib = 1 << 20
