package bench

import (
	"bufio"
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
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// clusterBenchEnv must be set for the multi-node benchmarks to run:
	// they start whole clusters, so `make bench` runs them on their own,
	// after the others.
	clusterBenchEnv = "NODELET_BENCH_CLUSTER"
	// clusterStartRunsEnv overrides clusterStartRuns.
	clusterStartRunsEnv = "NODELET_BENCH_CLUSTER_RUNS"
	// clusterStartRuns is how often BenchmarkClusterStart starts each
	// cluster size.
	clusterStartRuns = 3
	// dnsTimeout bounds the wait for the cluster DNS to answer after
	// StartCluster returned.
	dnsTimeout = 2 * time.Minute
	// rttPort is where the rtt servers listen.
	rttPort = 7000
	// rttRounds is how many round trips rtt measures per address and kind.
	rttRounds = 2000
)

// skipUnlessCluster skips a multi-node benchmark unless clusterBenchEnv is
// set.
func skipUnlessCluster(b *testing.B) {
	b.Helper()
	if os.Getenv(clusterBenchEnv) == "" {
		b.Skipf("starts whole clusters; set %s=1 (make bench does, after the other benchmarks)", clusterBenchEnv)
	}
	quietLogger.Do(func() { ctrllog.SetLogger(logr.Discard()) })
}

// startPhases are the moments a cluster start passed, from the call to
// StartCluster to the cluster DNS answering.
type startPhases struct {
	mu    sync.Mutex
	begin time.Time
	// controlPlane is the last part recorded before the first node's
	// containerd: the scheduler, once etcd, the API server and the
	// controller-manager run.
	controlPlane time.Time
	nodeStarted  bool
	// nodesReady is when StartCluster called the add-ons: every node
	// Ready with its pod subnet routed.
	nodesReady time.Time
	// addonsReady is when kube-proxy and CoreDNS were ready.
	addonsReady time.Time
	// dnsAnswered is when a query to the cluster DNS from a node's
	// network namespace was answered.
	dnsAnswered time.Time
}

// record is a ClusterOptions.Record.
func (p *startPhases) record(part utils.ClusterPart) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if part.Containerd != nil {
		p.nodeStarted = true
	}
	if !p.nodeStarted {
		p.controlPlane = time.Now()
	}
	return nil
}

// addons is a ClusterOptions.Addons: utils.InstallClusterAddons, timed.
func (p *startPhases) addons(ctx context.Context, c *utils.Cluster) error {
	p.mu.Lock()
	p.nodesReady = time.Now()
	p.mu.Unlock()
	err := utils.InstallClusterAddons(ctx, c)
	p.mu.Lock()
	p.addonsReady = time.Now()
	p.mu.Unlock()
	if err != nil {
		// StartCluster stops the cluster on this error: say now what the
		// add-on pods and the nodes were doing.
		return fmt.Errorf("%w\n%s", err, addonsState(c))
	}
	return nil
}

// addonsState describes the add-on pods and the end of each nodelet's log.
func addonsState(c *utils.Cluster) string {
	var sb strings.Builder
	cs, err := kubernetes.NewForConfig(c.API.Config)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(utils.AddonsNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&sb, "listing the add-on pods: %v\n", err)
	} else {
		for _, pod := range pods.Items {
			fmt.Fprintf(&sb, "pod %s on %q: %s %v\n", pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.Conditions)
			for _, st := range pod.Status.ContainerStatuses {
				fmt.Fprintf(&sb, "  container %s ready=%v restarts=%d state=%+v\n", st.Name, st.Ready, st.RestartCount, st.State)
			}
		}
	}
	for _, n := range c.Nodes {
		if n.Nodelet != nil {
			fmt.Fprintf(&sb, "nodelet %s:\n%s\n", n.Name, n.Nodelet.LogTail(30))
		}
	}
	return sb.String()
}

// durations are the phases' lengths: control plane, nodes Ready, add-ons
// Ready, DNS answering, and the total.
func (p *startPhases) durations() [5]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return [5]time.Duration{
		p.controlPlane.Sub(p.begin),
		p.nodesReady.Sub(p.controlPlane),
		p.addonsReady.Sub(p.nodesReady),
		p.dnsAnswered.Sub(p.addonsReady),
		p.dnsAnswered.Sub(p.begin),
	}
}

var phaseNames = [5]string{"control plane", "nodes Ready", "add-ons Ready", "DNS answering", "total: call → DNS answering"}

// BenchmarkClusterStart starts clusters of 1 and of 3 nodes with the
// add-ons (kube-proxy, CoreDNS) through utils.StartCluster, a few times
// each, and times each start from the call until every node is Ready and
// the cluster DNS answers a query for the kubernetes Service from a node's
// network namespace, split into phases. The images and binaries are built
// before the first run, so every run starts with the caches warm.
func BenchmarkClusterStart(b *testing.B) {
	skipUnlessCluster(b)
	runs := clusterStartRuns
	if v := os.Getenv(clusterStartRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", clusterStartRunsEnv, v)
		}
		runs = n
	}
	warmCaches(b, nil)
	for range b.N {
		results := map[int][][5]time.Duration{}
		for _, nodes := range []int{1, 3} {
			for run := range runs {
				d, err := timeClusterStart(b.Context(), nodes)
				if err != nil {
					b.Fatalf("%d nodes, run %d: %v", nodes, run, err)
				}
				results[nodes] = append(results[nodes], d)
				b.Logf("%d nodes, run %d: %v", nodes, run, d)
			}
		}
		printPhaseTable(fmt.Sprintf("cluster start with kube-proxy and CoreDNS, caches warm (images and binaries built), %d runs each: median (min – max) (%s)", runs, machine()), results)
		for nodes, ds := range results {
			b.ReportMetric(medianOf(ds, 4).Seconds(), fmt.Sprintf("s-start-%dnodes", nodes))
		}
	}
}

// warmCaches builds what a cluster start would otherwise build on its
// first run: the envtest binaries, nodelet, the test images and the add-on
// images.
func warmCaches(b *testing.B, extra []string) {
	b.Helper()
	ctx := b.Context()
	if _, err := utils.EnvtestAssets(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := utils.NodeletBinary(ctx); err != nil {
		b.Fatal(err)
	}
	for _, image := range slices.Concat(utils.TestImages, []string{utils.WebImage}, extra) {
		if _, err := utils.ImageArchive(ctx, image); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := utils.AddonImages(ctx); err != nil {
		b.Fatal(err)
	}
}

// timeClusterStart starts a cluster of n nodes, waits for its DNS, stops
// it and returns its phases.
func timeClusterStart(ctx context.Context, nodes int) (_ [5]time.Duration, err error) {
	p := &startPhases{}
	p.begin = time.Now()
	c, err := utils.StartCluster(ctx, utils.ClusterOptions{
		Nodes:      nodes,
		NamePrefix: "bench",
		Addons:     p.addons,
		Record:     p.record,
	})
	if err != nil {
		return [5]time.Duration{}, err
	}
	defer func() {
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := waitClusterDNS(ctx, c.Nodes[0]); err != nil {
		return [5]time.Duration{}, err
	}
	p.mu.Lock()
	p.dnsAnswered = time.Now()
	p.mu.Unlock()
	return p.durations(), nil
}

// waitClusterDNS waits until the cluster DNS answers a query for the
// kubernetes Service's name with its ClusterIP, asked from node's network
// namespace with the host's busybox nslookup.
func waitClusterDNS(ctx context.Context, node *utils.ClusterNode) error {
	name := "kubernetes.default.svc." + utils.DefaultClusterDomain
	deadline := time.Now().Add(dnsTimeout)
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := exec.CommandContext(qctx, "nsenter", "--net="+node.Net.NetNSPath(),
			"/bin/busybox", "nslookup", name, utils.DefaultDNSIP).CombinedOutput()
		cancel()
		if err == nil && dnsAnswer(string(out), utils.KubernetesServiceIP.String()) {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("no answer with the kubernetes Service's address")
			}
			return fmt.Errorf("the cluster DNS does not answer %s from node %s after %s: %w: %s", name, node.Name, dnsTimeout, err, out)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dnsAnswer reports whether nslookup's output has ip as an answer (not as
// the server's address, which comes first).
func dnsAnswer(out, ip string) bool {
	_, answers, ok := strings.Cut(out, "Name:")
	if !ok {
		return false
	}
	for line := range strings.SplitSeq(answers, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Address" && strings.TrimSpace(v) == ip {
			return true
		}
	}
	return false
}

// medianOf is the median of the i-th phase of ds.
func medianOf(ds [][5]time.Duration, i int) time.Duration {
	return percentile(column(ds, i), 50)
}

func column(ds [][5]time.Duration, i int) []time.Duration {
	out := make([]time.Duration, 0, len(ds))
	for _, d := range ds {
		out = append(out, d[i])
	}
	return out
}

// printPhaseTable prints one row per phase, one column per cluster size.
func printPhaseTable(title string, results map[int][][5]time.Duration) {
	sizes := slices.Sorted(maps.Keys(results))
	fmt.Println()
	fmt.Println(title)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprint(tw, "phase")
	for _, n := range sizes {
		fmt.Fprintf(tw, "\tNODES=%d", n)
	}
	fmt.Fprintln(tw, "\t")
	for i, name := range phaseNames {
		fmt.Fprint(tw, name)
		for _, n := range sizes {
			col := column(results[n], i)
			fmt.Fprintf(tw, "\t%s (%s – %s)", fmtDur(percentile(col, 50)), fmtDur(slices.Min(col)), fmtDur(slices.Max(col)))
		}
		fmt.Fprintln(tw, "\t")
	}
	_ = tw.Flush()
	fmt.Println()
}

// rttResult is one line rtt client printed: the percentiles of one kind of
// round trip to one address.
type rttResult struct {
	addr, mode    string
	p50, p90, p99 time.Duration
}

// parseRTT reads rtt client's result lines.
func parseRTT(out string) ([]rttResult, error) {
	var res []rttResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "result" {
			continue
		}
		kv := map[string]string{}
		for _, f := range fields[1:] {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		r := rttResult{addr: kv["addr"], mode: kv["mode"]}
		for key, dst := range map[string]*time.Duration{"p50_ns": &r.p50, "p90_ns": &r.p90, "p99_ns": &r.p99} {
			ns, err := strconv.ParseInt(kv[key], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parsing %q: %s: %w", sc.Text(), key, err)
			}
			*dst = time.Duration(ns)
		}
		res = append(res, r)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no result lines in %q", out)
	}
	return res, nil
}

// rttPath is one measured path: a label and the results for it.
type rttPath struct {
	label string
	rr    rttResult
	crr   rttResult
}

// pathsFrom picks the rr and crr results of addr from res.
func pathsFrom(label, addr string, res []rttResult) (rttPath, error) {
	p := rttPath{label: label}
	for _, r := range res {
		if r.addr != addr {
			continue
		}
		switch r.mode {
		case "rr":
			p.rr = r
		case "crr":
			p.crr = r
		}
	}
	if p.rr.mode == "" || p.crr.mode == "" {
		return p, fmt.Errorf("%s: no rr and crr results for %s in %v", label, addr, res)
	}
	return p, nil
}

// BenchmarkClusterPodLatency measures TCP round trips from a pod on node 1
// to a pod on node 3 of a 3-node cluster, by pod IP and through a ClusterIP
// Service, against the same program between two processes on the host
// (loopback), from the host to a process in node 3's network namespace
// (its node address) and from node 1's namespace to node 3's. rr is one
// 64-byte message and its echo over a connection kept open; crr opens a
// new connection for each.
func BenchmarkClusterPodLatency(b *testing.B) {
	skipUnlessCluster(b)
	warmCaches(b, []string{utils.RTTImage})
	ctx := b.Context()
	bin := rttBinary(b)
	for range b.N {
		c, err := utils.StartCluster(ctx, utils.ClusterOptions{
			Nodes:      3,
			NamePrefix: "bench",
			Images:     slices.Concat(utils.TestImages, []string{utils.WebImage, utils.RTTImage}),
			Addons:     utils.InstallClusterAddons,
		})
		if err != nil {
			b.Fatalf("starting the cluster: %v", err)
		}
		b.Cleanup(func() {
			if err := c.Stop(); err != nil {
				b.Errorf("stopping the cluster: %v", err)
			}
		})
		cs, err := kubernetes.NewForConfig(c.API.Config)
		if err != nil {
			b.Fatal(err)
		}
		admin, err := c.AdminClient()
		if err != nil {
			b.Fatal(err)
		}
		ns := "bench-rtt"
		if err := utils.CreateNamespace(ctx, admin, ns); err != nil {
			b.Fatal(err)
		}
		server, client := c.Node(3), c.Node(1)

		podIP, svcIP := startRTTServerPod(b, cs, ns, server.Name)
		podAddr, svcAddr := hostPort(podIP), hostPort(svcIP)
		out := runRTTClientPod(b, cs, ns, client.Name, podAddr, svcAddr)
		res, err := parseRTT(out)
		if err != nil {
			b.Fatal(err)
		}
		podPath, err := pathsFrom("pod node 1 → pod node 3, pod IP", podAddr, res)
		if err != nil {
			b.Fatal(err)
		}
		svcPath, err := pathsFrom("pod node 1 → pod node 3, ClusterIP Service", svcAddr, res)
		if err != nil {
			b.Fatal(err)
		}

		// The host references: the same program as host processes.
		loopAddr := freeLoopbackAddr(b)
		stopLoop := startRTTServer(b, bin, nil, loopAddr)
		loop := runHostRTT(b, bin, nil, "host process → host process, loopback", loopAddr)
		stopLoop()
		nodeAddr := hostPort(server.IP.String())
		stopNode := startRTTServer(b, bin, server.Net, nodeAddr)
		hostNode := runHostRTT(b, bin, nil, "host → process in node 3's namespace, node address", nodeAddr)
		nodeNode := runHostRTT(b, bin, client.Net, "node 1's namespace → node 3's, node address", nodeAddr)
		stopNode()

		printRTTTable(fmt.Sprintf("TCP round trips, %d per kind after a warm-up, 64-byte messages (%s)", rttRounds, machine()),
			[]rttPath{podPath, svcPath, loop, hostNode, nodeNode}, loop)
		b.ReportMetric(float64(podPath.rr.p50.Microseconds()), "us-p50-rr-pod")
		b.ReportMetric(float64(svcPath.rr.p50.Microseconds()), "us-p50-rr-service")
		b.ReportMetric(float64(loop.rr.p50.Microseconds()), "us-p50-rr-loopback")
	}
}

func hostPort(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(rttPort)) }

// freeLoopbackAddr is a loopback address with a port nothing listens on
// now: the host's rttPort may be taken.
func freeLoopbackAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// rttBinary compiles test/images/rtt for host processes.
func rttBinary(b *testing.B) string {
	b.Helper()
	bin, err := utils.CompileProgram(b.Context(), utils.RTTProgram)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), utils.RTTProgram)
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		b.Fatal(err)
	}
	return path
}

// rttCommand runs the rtt binary with args, in node's network namespace
// when node is set.
func rttCommand(ctx context.Context, bin string, node *utils.NetNode, args ...string) *exec.Cmd {
	if node == nil {
		return exec.CommandContext(ctx, bin, args...)
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + node.NetNSPath(), bin}, args...)...)
}

// startRTTServer runs `rtt server` as a host process (in node's network
// namespace when set) and returns the function that stops it.
func startRTTServer(b *testing.B, bin string, node *utils.NetNode, addr string) func() {
	b.Helper()
	cmd := rttCommand(context.Background(), bin, node, "server", "-listen", addr)
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting rtt server on %s: %v", addr, err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	b.Cleanup(stop)
	return stop
}

// runHostRTT runs `rtt client` as a host process against addr.
func runHostRTT(b *testing.B, bin string, node *utils.NetNode, label, addr string) rttPath {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	out, err := rttCommand(ctx, bin, node, "client", "-n", strconv.Itoa(rttRounds), addr).CombinedOutput()
	if err != nil {
		b.Fatalf("%s: rtt client: %v: %s", label, err, out)
	}
	res, err := parseRTT(string(out))
	if err == nil {
		var p rttPath
		if p, err = pathsFrom(label, addr, res); err == nil {
			return p
		}
	}
	b.Fatal(err)
	return rttPath{}
}

// startRTTServerPod runs `rtt server` in a pod bound to node behind a
// ClusterIP Service, waits until it is Ready and returns its pod IP and
// the Service's ClusterIP.
func startRTTServerPod(b *testing.B, cs kubernetes.Interface, ns, node string) (podIP, svcIP string) {
	b.Helper()
	ctx := b.Context()
	labels := map[string]string{"app": "rtt-server"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rtt-server", Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "server", Image: utils.RTTImage, ImagePullPolicy: corev1.PullNever,
				Args:  []string{"server", "-listen", fmt.Sprintf(":%d", rttPort)},
				Ports: []corev1.ContainerPort{{ContainerPort: rttPort}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating the rtt server pod: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "rtt", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: rttPort, TargetPort: intstr.FromInt32(rttPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	created, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("creating the rtt Service: %v", err)
	}
	deadline := time.Now().Add(podsTimeout)
	for {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && utils.PodReady(got) && got.Status.PodIP != "" {
			return got.Status.PodIP, created.Spec.ClusterIP
		}
		if time.Now().After(deadline) {
			b.Fatalf("the rtt server pod is not Ready after %s (last error %v)", podsTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runRTTClientPod runs `rtt client` against addrs in a pod bound to node,
// waits for it to succeed and returns its log.
func runRTTClientPod(b *testing.B, cs kubernetes.Interface, ns, node string, addrs ...string) string {
	b.Helper()
	ctx := b.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rtt-client", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: utils.RTTImage, ImagePullPolicy: corev1.PullNever,
				Args: append([]string{"client", "-n", strconv.Itoa(rttRounds)}, addrs...),
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating the rtt client pod: %v", err)
	}
	deadline := time.Now().Add(podsTimeout)
	for {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed) {
			out, lerr := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "client"}).DoRaw(ctx)
			if lerr != nil {
				b.Fatalf("reading the rtt client's log: %v", lerr)
			}
			if got.Status.Phase == corev1.PodFailed {
				b.Fatalf("the rtt client pod failed: %s", out)
			}
			return string(out)
		}
		if time.Now().After(deadline) {
			b.Fatalf("the rtt client pod has not finished after %s (last error %v)", podsTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// printRTTTable prints each path's percentiles and its p50 over ref's.
func printRTTTable(title string, paths []rttPath, ref rttPath) {
	fmt.Println()
	fmt.Println(title)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "path\trr p50 / p90 / p99\t× loopback\tcrr p50 / p90 / p99\t× loopback\t")
	for _, p := range paths {
		fmt.Fprintf(tw, "%s\t%s\t%.1f ×\t%s\t%.1f ×\t\n", p.label,
			fmtPercentiles(p.rr), ratio(p.rr.p50, ref.rr.p50),
			fmtPercentiles(p.crr), ratio(p.crr.p50, ref.crr.p50))
	}
	_ = tw.Flush()
	fmt.Println()
}

func fmtPercentiles(r rttResult) string {
	return fmtMicros(r.p50) + " / " + fmtMicros(r.p90) + " / " + fmtMicros(r.p99)
}

// fmtMicros prints a round trip in microseconds.
func fmtMicros(d time.Duration) string {
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

func ratio(d, ref time.Duration) float64 {
	if ref <= 0 {
		return 0
	}
	return float64(d) / float64(ref)
}
