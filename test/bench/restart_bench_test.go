package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// restartPodsEnv sets how many pods run through BenchmarkRestart's
	// restart (default scaleMaxPods, the goal's figure; fewer to try it
	// on a busy machine, up to maxDensePods for a dense node, whose
	// agents then get that maxPods).
	restartPodsEnv = "NODELET_BENCH_RESTART_PODS"
	// restartAgentsEnv picks the agents BenchmarkRestart restarts, a
	// comma-separated list of nodelet and kubelet (default both).
	restartAgentsEnv = "NODELET_BENCH_RESTART_AGENTS"
	// restartSignalEnv is the signal that ends the agent: KILL (the
	// default, a crash) or TERM (a stop the agent is told of).
	restartSignalEnv = "NODELET_BENCH_RESTART_SIGNAL"
	// restartSettle passes between the last pod Ready and the signal,
	// so that the agent is at rest when it goes.
	restartSettle = 5 * time.Second
	// restartToleration is the toleration the benchmark adds to every pod
	// while the agent is down: a spec change (the pod's generation goes
	// up) that changes nothing on the node, so that only a status written
	// by the new process can carry the new observedGeneration.
	restartToleration = "bench.nodelet.io/restart"

	// Targets of a restart of scaleMaxPods pods (another count has none).
	restartCurrentTarget = 5 * time.Second
)

// restartResult is what one agent's restart with pods running measured.
type restartResult struct {
	agent string
	pods  int
	// healthy runs from the new process's start to its health endpoint
	// answering, current to the last pod seen current (see restartOn);
	// down from the signal to the new process's start (the old process
	// gone, the spec changes written).
	healthy, current, down time.Duration
	// restarted counts the pods' containers whose ID or restart count
	// changed; created the runtime's containers and sandboxes that were
	// not there before the signal.
	restarted, created int
	// criCalls are the new process's CRI calls until all were current
	// (NaN when its metrics could not be read); requests the agent's API
	// requests from the signal until all were current, in total ("") and
	// per verb ("/GET", …).
	criCalls float64
	requests map[string]float64
	// cpu is the new process's CPU until all were current, rss its
	// resident memory then.
	cpu time.Duration
	rss int64
}

// BenchmarkRestart restarts each agent with pods running: N sleeper pods
// (NODELET_BENCH_RESTART_PODS, default 250) created at once and Ready, the
// agent's process ended with SIGKILL (NODELET_BENCH_RESTART_SIGNAL=TERM for
// SIGTERM), a toleration added to every pod while it is down, the agent
// started again on the same directory, and the time measured from the new
// process's start until every pod's status is current: Ready, with the
// status's observedGeneration at the pod's new generation. Only a status
// written by the new process can carry that generation, and only after it
// has read the pod and looked at the runtime. Containers restarted (the
// pods' container IDs or restart counts changed, or new containers in the
// runtime) must be none. nodelet and the real kubelet run one after the
// other on the same API server and containerd (NODELET_BENCH_RESTART_AGENTS
// picks them).
func BenchmarkRestart(b *testing.B) {
	pods, err := envInt(restartPodsEnv, scaleMaxPods)
	if err != nil || pods < 1 || pods > maxDensePods {
		b.Fatalf("$%s: want a pod count from 1 to %d (%v)", restartPodsEnv, maxDensePods, err)
	}
	agents, err := parseAgents(os.Getenv(restartAgentsEnv))
	if err != nil {
		b.Fatalf("$%s: %v", restartAgentsEnv, err)
	}
	sig, err := parseSignal(os.Getenv(restartSignalEnv))
	if err != nil {
		b.Fatalf("$%s: %v", restartSignalEnv, err)
	}
	c := startClusterFor(b, max(pods, scaleMaxPods))
	floor := newCRIFloor(b, c.ctrd)
	for i := range b.N {
		ctx := b.Context()
		loadBefore := loadAverage()
		results := map[string]restartResult{}
		for _, name := range agents {
			ag := c.startAgent(b, floor, name, fmt.Sprintf("restart-%d", i))
			ns := c.newNamespace(b, fmt.Sprintf("restart-%s-%d", name, i))
			w := c.watchPods(b, ns)
			names := make([]string, pods)
			for j := range names {
				names[j] = fmt.Sprintf("sleeper-%03d", j)
			}
			c.createAll(ctx, b, ns, names)
			if _, missing := w.waitAll(names, w.readyAt, podsTimeout); missing > 0 {
				b.Fatalf("%s: %d of %d pods not Ready after %s; log:\n%s", name, missing, pods, podsTimeout, ag.logTail(60))
			}
			time.Sleep(restartSettle)
			results[name] = c.restartOn(b, ag, floor, w, ns, names, sig)
			w.close()
			ag.stop()
			if err := c.forgetNode(ctx, floor); err != nil {
				b.Fatalf("clearing up after %s: %v", name, err)
			}
		}
		header := fmt.Sprintf("%s; load average %s before, %s after (the machine is shared)",
			machineDetails(floor.runtimeVersion(ctx)), loadBefore, loadAverage())
		printSideBySide(fmt.Sprintf("restart with %d pods running (node %s, %s; %s)", pods, benchNode, signalName(sig), header),
			restartFigures(results[kubeletAgentName], results[nodeletAgentName], pods))
		if r, ok := results[nodeletAgentName]; ok {
			b.ReportMetric(r.current.Seconds(), "s-nodelet-restart-current")
			b.ReportMetric(float64(r.restarted+r.created), "nodelet-containers-restarted")
		}
		if r, ok := results[kubeletAgentName]; ok {
			b.ReportMetric(r.current.Seconds(), "s-kubelet-restart-current")
		}
	}
}

// podSnapshot is what a pod's status said of its containers.
type podSnapshot struct {
	ids      map[string]string
	restarts map[string]int32
}

// containersOf is what p's status says of its containers.
func containersOf(p *corev1.Pod) podSnapshot {
	s := podSnapshot{ids: map[string]string{}, restarts: map[string]int32{}}
	for _, cs := range p.Status.ContainerStatuses {
		s.ids[cs.Name], s.restarts[cs.Name] = cs.ContainerID, cs.RestartCount
	}
	return s
}

// changedFrom counts the containers whose ID or restart count differ from
// the earlier snapshot.
func (s podSnapshot) changedFrom(earlier podSnapshot) int {
	n := 0
	for name, id := range earlier.ids {
		if s.ids[name] != id || s.restarts[name] != earlier.restarts[name] {
			n++
		}
	}
	return n
}

// restartOn ends ag's process with sig while the pods of names in ns run,
// gives each pod a new toleration while the agent is down (its generation
// goes up), starts the agent again and waits until every pod is current:
// Ready with status.observedGeneration at least the new generation. It
// counts the containers restarted, and the new process's CRI calls, API
// requests and CPU until then.
func (c *cluster) restartOn(b *testing.B, ag agent, floor *criFloor, w *podWatch, ns string, names []string, sig syscall.Signal) restartResult {
	b.Helper()
	ctx := b.Context()
	r := restartResult{agent: ag.name(), pods: len(names), criCalls: nan}
	before, err := c.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatalf("listing pods: %v", err)
	}
	snapshots := map[string]podSnapshot{}
	tolerations := map[string][]corev1.Toleration{}
	for i := range before.Items {
		p := &before.Items[i]
		snapshots[p.Name], tolerations[p.Name] = containersOf(p), p.Spec.Tolerations
	}
	objects0, err := floor.runtimeObjects(ctx)
	if err != nil {
		b.Fatal(err)
	}
	req0, err := c.apiRequests(ctx)
	if err != nil {
		b.Fatal(err)
	}

	t0 := time.Now()
	if err := ag.kill(sig); err != nil {
		b.Fatalf("ending %s: %v", ag.name(), err)
	}
	var mu sync.Mutex
	generation := map[string]int64{}
	err = forEach(len(names), createWorkers, func(j int) error {
		gen, err := c.addToleration(ctx, ns, names[j], tolerations[names[j]])
		mu.Lock()
		generation[names[j]] = gen
		mu.Unlock()
		return err
	})
	if err != nil {
		b.Fatalf("changing the pods while %s is down: %v", ag.name(), err)
	}
	w.expect(func(p *corev1.Pod) bool {
		mu.Lock()
		want, ok := generation[p.Name]
		mu.Unlock()
		return ok && p.Status.ObservedGeneration >= want && utils.PodReady(p)
	})

	t1 := time.Now()
	r.down = t1.Sub(t0)
	if err := ag.start(ctx); err != nil {
		b.Fatalf("starting %s again: %v; log:\n%s", ag.name(), err, ag.logTail(60))
	}
	r.healthy = time.Since(t1)
	last, missing := w.waitAll(names, w.matchedAt, podsTimeout)
	if missing > 0 {
		b.Fatalf("%s: %d of %d pods not current %s after the restart; log:\n%s", ag.name(), missing, len(names), podsTimeout, ag.logTail(60))
	}
	r.current = last.Sub(t1)
	cpu, err := processCPU(ag.pid())
	if err != nil {
		b.Fatalf("reading the usage of %s: %v", ag.name(), err)
	}
	r.cpu, r.rss = cpu, readMemSplit(ag.pid()).rss
	if calls, ok := ag.runtimeCalls(); ok {
		r.criCalls = calls
	}
	req1, err := c.apiRequests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	own := map[string]float64{"": float64(len(names)), "/PATCH": float64(len(names))}
	r.requests = agentRequests(req0, req1, own)

	after, err := c.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatalf("listing pods: %v", err)
	}
	for i := range after.Items {
		p := &after.Items[i]
		r.restarted += containersOf(p).changedFrom(snapshots[p.Name])
	}
	objects1, err := floor.runtimeObjects(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for id := range objects1 {
		if !objects0[id] {
			r.created++
		}
	}
	return r
}

// addToleration adds restartToleration to the pod's tolerations (had)
// and returns the pod's generation after the change.
func (c *cluster) addToleration(ctx context.Context, ns, name string, had []corev1.Toleration) (int64, error) {
	tol := append(append([]corev1.Toleration(nil), had...), corev1.Toleration{
		Key: restartToleration, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"tolerations": tol}})
	if err != nil {
		return 0, fmt.Errorf("encoding the toleration of %s/%s: %w", ns, name, err)
	}
	p, err := c.admin.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return 0, fmt.Errorf("adding a toleration to %s/%s: %w", ns, name, err)
	}
	return p.Generation, nil
}

// restartFigures are the restart table's rows, nodelet's against the
// kubelet's (an agent not run has NaN), for a restart of pods pods.
func restartFigures(kubelet, nodelet restartResult, pods int) []figure {
	currentTarget := restartCurrentTarget.Seconds()
	if pods != scaleMaxPods {
		currentTarget = 0
	}
	get := func(r restartResult, v func(restartResult) float64) float64 {
		if r.pods == 0 {
			return nan
		}
		return v(r)
	}
	row := func(f figure, v func(restartResult) float64) figure {
		f.floor, f.kubelet, f.nodelet = nan, get(kubelet, v), get(nodelet, v)
		return f
	}
	perPod := func(r restartResult, x float64) float64 { return x / float64(r.pods) }
	count := func(v float64) string { return strconv.Itoa(int(v)) }
	return []figure{
		row(figure{name: "new process → every pod's status current", format: fmtSeconds, maxValue: currentTarget},
			func(r restartResult) float64 { return r.current.Seconds() }),
		row(figure{name: "new process → health endpoint answering", format: fmtSeconds},
			func(r restartResult) float64 { return r.healthy.Seconds() }),
		row(figure{name: "signal → new process (spec changes written meanwhile)", format: fmtSeconds},
			func(r restartResult) float64 { return r.down.Seconds() }),
		row(figure{name: "containers restarted (ID or restart count changed)", format: count, mustBeZero: true},
			func(r restartResult) float64 { return float64(r.restarted) }),
		row(figure{name: "containers and sandboxes created in the runtime", format: count, mustBeZero: true},
			func(r restartResult) float64 { return float64(r.created) }),
		row(figure{name: "CRI calls/pod of the new process", format: fmtPerPod, note: "printed"},
			func(r restartResult) float64 { return perPod(r, r.criCalls) }),
		row(figure{name: "API requests/pod, signal → all current", format: fmtPerPod, note: "printed"},
			func(r restartResult) float64 { return perPod(r, r.requests[""]) }),
		row(figure{name: "… of them GET / LIST (reads)", format: fmtPerPod},
			func(r restartResult) float64 { return perPod(r, r.requests["/GET"]+r.requests["/LIST"]) }),
		row(figure{name: "… of them PATCH (status)", format: fmtPerPod},
			func(r restartResult) float64 { return perPod(r, r.requests["/PATCH"]) }),
		row(figure{name: "agent CPU, new process → all current", format: fmtSeconds},
			func(r restartResult) float64 { return r.cpu.Seconds() }),
		row(figure{name: "RSS when all current", format: fmtMiB},
			func(r restartResult) float64 { return float64(r.rss) }),
	}
}

// envInt reads an integer from the environment; def when unset.
func envInt(name string, def int) (int, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("reading $%s: %w", name, err)
	}
	return n, nil
}

// parseAgents reads a comma-separated list of agent names; empty is both,
// nodelet first.
func parseAgents(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return []string{nodeletAgentName, kubeletAgentName}, nil
	}
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		switch name := strings.TrimSpace(f); name {
		case nodeletAgentName, kubeletAgentName:
			out = append(out, name)
		default:
			return nil, fmt.Errorf("%q is neither %s nor %s", name, nodeletAgentName, kubeletAgentName)
		}
	}
	return out, nil
}

// parseSignal reads KILL or TERM (with or without SIG); empty is KILL.
func parseSignal(s string) (syscall.Signal, error) {
	switch strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG") {
	case "", "KILL":
		return syscall.SIGKILL, nil
	case "TERM":
		return syscall.SIGTERM, nil
	}
	return 0, fmt.Errorf("%q is neither KILL nor TERM", s)
}

func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGKILL"
}
