package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// burstPods is the default maxPods: a node filled at once.
	burstPods = 110
	// createWorkers create (and later delete) the burst's pods through the
	// admin client.
	createWorkers = 8
	// singleRuns is how often BenchmarkSinglePodStart starts one pod.
	singleRuns = 20
	// restWindow is how long the node sits with all burst pods running,
	// to measure what nodelet costs per second at rest.
	restWindow = 10 * time.Second

	// Targets (the project's performance goal; BenchmarkSideBySide adds
	// the ones against the kubelet).
	burstFloorFactor = 1.05
	// teardownFloorFactor bounds deleting the burst against removing the
	// same pods straight through the CRI.
	teardownFloorFactor = 1.05
	peakRSSTarget       = 35 * mib
	// peakRSSTarget250 is the peak RSS target of a node of 250 pods.
	peakRSSTarget250 = 45 * mib
	// burstCPUTarget bounds the agent's CPU from the first create to the
	// last pod Ready.
	burstCPUTarget    = time.Second
	writesPerPodLimit = 3.0
	singleOverFloor   = 30 * time.Millisecond
)

// burstResult is what one burst through nodelet measured.
type burstResult struct {
	// The CRI floor: 110 pods with criWorkers workers and one by one,
	// and the removal of the 110 with criWorkers workers.
	floor16, floorSeq, floorRemove16 time.Duration
	// allReady runs from the first Create to the last pod seen Ready;
	// toReady holds each pod's create→Ready.
	allReady   time.Duration
	toReady    []time.Duration
	floorRatio float64
	// p50, p90, p99 and minReady are over toReady.
	p50, p90, p99, minReady time.Duration
	// nodeletStartMean is nodelet's own first-seen→running, averaged.
	nodeletStartMean time.Duration
	// allGone runs from the first Delete to the last pod seen gone.
	allGone time.Duration
	// peakRSS is nodelet's VmHWM at the end; cpu*, writesPerPod* and
	// requestsPerPod* are deltas over the start (create→all Ready) and the
	// whole burst (start plus delete→all gone, not the rest window).
	peakRSS                                int64
	cpuStart, cpuTotal                     time.Duration
	writesPerPodStart, writesPerPodAll     float64
	requestsPerPodStart, requestsPerPodAll float64
	// cpuRest is nodelet's CPU per second at rest with all pods running.
	cpuRest float64
	// idleRSS is nodelet's peak RSS before the burst; heapInuse and
	// goSys are the Go runtime's view at the end.
	idleRSS, heapInuse, goSys int64
	// requestsByVerb is requestsPerPodAll by HTTP method.
	requestsByVerb string
	// rssAnon and rssFile split nodelet's resident memory at the end into
	// anonymous memory (heap, stacks) and file pages (mostly its binary).
	rssAnon, rssFile int64
	// eventsPerPod are the Events in the namespace at the end, per pod.
	eventsPerPod float64
	// checkpointsPerPodStart and checkpointsPerPodTeardown are nodelet's
	// durable checkpoint writes per pod over the start and the teardown.
	checkpointsPerPodStart, checkpointsPerPodTeardown float64
}

// BenchmarkPodBurst110 fills a node at once: 110 pods created together, all
// watched until Ready, then all deleted and watched until gone, against the
// CRI floor measured on the same containerd just before.
func BenchmarkPodBurst110(b *testing.B) {
	c := startCluster(b)
	floor := newCRIFloor(b, c.ctrd)
	for i := range b.N {
		ctx := b.Context()
		var r burstResult
		var err error
		if r.floor16, r.floorRemove16, err = floor.burst(ctx, burstPods, criWorkers); err != nil {
			b.Fatalf("CRI floor, %d workers: %v", criWorkers, err)
		}
		if r.floorSeq, _, err = floor.burst(ctx, burstPods, 1); err != nil {
			b.Fatalf("CRI floor, sequential: %v", err)
		}

		n, stopNodelet := c.startNodelet(b, fmt.Sprintf("burst-%d", i))
		ns := c.newNamespace(b, fmt.Sprintf("bench-burst-%d", i))
		w := c.watchPods(b, ns)
		names := make([]string, burstPods)
		for j := range names {
			names[j] = fmt.Sprintf("sleeper-%03d", j)
		}

		before, err := n.Usage()
		if err != nil {
			b.Fatalf("reading nodelet usage: %v", err)
		}
		m0, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}

		// Create all at once; each pod's clock starts just before its
		// Create call.
		stopProfile := profileWindow(b, n, "burst-start")
		t0, created := c.createAll(ctx, b, ns, names)
		lastReady, missing := w.waitAll(names, w.readyAt, podsTimeout)
		stopProfile()
		if missing > 0 {
			b.Fatalf("%d of %d pods not Ready after %s; nodelet log:\n%s", missing, burstPods, podsTimeout, n.LogTail(60))
		}
		r.allReady = lastReady.Sub(t0)
		for _, name := range names {
			at, _ := w.readyAt(name)
			r.toReady = append(r.toReady, at.Sub(created[name]))
		}
		afterStart, err := n.Usage()
		if err != nil {
			b.Fatalf("reading nodelet usage: %v", err)
		}
		m1, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}

		// What the node costs at rest, with all pods running: the part of
		// the burst's CPU that grows with time rather than with pods.
		rest := restWindowFor(b, restWindow)
		stopProfile = profileWindowChunked(b, n, "burst-rest", int(rest/time.Second))
		time.Sleep(rest)
		stopProfile()
		beforeDelete, err := n.Usage()
		if err != nil {
			b.Fatalf("reading nodelet usage: %v", err)
		}
		r.cpuRest = (beforeDelete.CPU - afterStart.CPU).Seconds() / rest.Seconds()
		m1b, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}

		// Delete all at once, with the default options: the pods' one
		// second grace period.
		stopProfile = profileWindow(b, n, "burst-teardown")
		t1 := time.Now()
		err = forEach(burstPods, createWorkers, func(j int) error { return c.deletePod(ctx, ns, names[j]) })
		if err != nil {
			b.Fatalf("deleting pods: %v", err)
		}
		lastGone, missing := w.waitAll(names, w.goneAt, podsTimeout)
		stopProfile()
		if missing > 0 {
			b.Fatalf("%d of %d pods still in the API %s after deletion; nodelet log:\n%s", missing, burstPods, podsTimeout, n.LogTail(60))
		}
		r.allGone = lastGone.Sub(t1)
		after, err := n.Usage()
		if err != nil {
			b.Fatalf("reading nodelet usage: %v", err)
		}
		m2, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}
		mem := readMemSplit(n.PID())
		r.rssAnon, r.rssFile = mem.anon, mem.file
		events, err := c.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatalf("listing events: %v", err)
		}
		r.eventsPerPod = float64(len(events.Items)) / burstPods
		w.close()
		stopNodelet()

		const writes, requests = "nodelet_pod_status_writes_total", "rest_client_requests_total"
		r.idleRSS = before.PeakRSS
		r.heapInuse, r.goSys = int64(m2["go_memstats_heap_inuse_bytes"]), int64(m2["go_memstats_sys_bytes"])
		var verbs []string
		for _, verb := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			k := requests + "/" + verb
			if d := m1[k] - m0[k] + m2[k] - m1b[k]; d > 0 {
				verbs = append(verbs, fmt.Sprintf("%s %.2f", verb, d/burstPods))
			}
		}
		r.requestsByVerb = strings.Join(verbs, ", ")
		r.peakRSS = after.PeakRSS
		r.cpuStart = afterStart.CPU - before.CPU
		r.cpuTotal = r.cpuStart + after.CPU - beforeDelete.CPU
		r.writesPerPodStart = (m1[writes] - m0[writes]) / burstPods
		r.writesPerPodAll = (m1[writes] - m0[writes] + m2[writes] - m1b[writes]) / burstPods
		const checkpoints = "nodelet_checkpoint_write_duration_seconds_count"
		r.checkpointsPerPodStart = (m1[checkpoints] - m0[checkpoints]) / burstPods
		r.checkpointsPerPodTeardown = (m2[checkpoints] - m1b[checkpoints]) / burstPods
		r.requestsPerPodStart = (m1[requests] - m0[requests]) / burstPods
		r.requestsPerPodAll = (m1[requests] - m0[requests] + m2[requests] - m1b[requests]) / burstPods
		if cnt := m1["kubelet_pod_start_duration_seconds_count"] - m0["kubelet_pod_start_duration_seconds_count"]; cnt > 0 {
			sum := m1["kubelet_pod_start_duration_seconds_sum"] - m0["kubelet_pod_start_duration_seconds_sum"]
			r.nodeletStartMean = time.Duration(sum / cnt * float64(time.Second))
		}
		r.p50, r.p90, r.p99 = percentile(r.toReady, 50), percentile(r.toReady, 90), percentile(r.toReady, 99)
		r.minReady = slices.Min(r.toReady)
		r.floorRatio = r.allReady.Seconds() / r.floor16.Seconds()
		printBurst(r)

		b.ReportMetric(r.allReady.Seconds(), "s-all-ready")
		b.ReportMetric(r.floor16.Seconds(), "s-cri-floor")
		b.ReportMetric(r.floorRatio, "x-floor")
		b.ReportMetric(r.p50.Seconds(), "s-p50-ready")
		b.ReportMetric(r.p99.Seconds(), "s-p99-ready")
		b.ReportMetric(r.allGone.Seconds(), "s-all-gone")
		b.ReportMetric(r.floorRemove16.Seconds(), "s-cri-teardown")
		b.ReportMetric(float64(r.peakRSS)/mib, "MiB-peak-rss")
		b.ReportMetric(r.cpuTotal.Seconds(), "s-cpu")
		b.ReportMetric(r.writesPerPodAll, "writes/pod")
	}
}

func printBurst(r burstResult) {
	limit := time.Duration(float64(r.floor16) * burstFloorFactor)
	teardownLimit := time.Duration(float64(r.floorRemove16) * teardownFloorFactor)
	printTable(fmt.Sprintf("pod burst (%d pods, node %s, %s)", burstPods, benchNode, machine()), []row{
		{"CRI floor, 16 workers", fmtDur(r.floor16), "", ""},
		{"CRI floor, sequential", fmtDur(r.floorSeq), "", ""},
		{"CRI floor teardown, 16 workers", fmtDur(r.floorRemove16), "", ""},
		{"all Ready", fmtDur(r.allReady),
			fmt.Sprintf("≤ %.2f × CRI floor (%s) = %s", burstFloorFactor, fmtDur(r.floor16), fmtDur(limit)),
			verdict(r.allReady <= limit)},
		{"all Ready ÷ CRI floor", fmt.Sprintf("%.2f×", r.floorRatio), fmt.Sprintf("≤ %.2f×", burstFloorFactor), verdict(r.floorRatio <= burstFloorFactor)},
		{"create→Ready min", fmtDur(r.minReady), "", ""},
		{"create→Ready p50", fmtDur(r.p50), "", ""},
		{"create→Ready p90", fmtDur(r.p90), "", ""},
		{"create→Ready p99", fmtDur(r.p99), "", ""},
		{"seen→running mean (nodelet's metric)", fmtDur(r.nodeletStartMean), "", ""},
		{"all deleted (grace 1s)", fmtDur(r.allGone),
			fmt.Sprintf("≤ %.2f × CRI teardown (%s) = %s", teardownFloorFactor, fmtDur(r.floorRemove16), fmtDur(teardownLimit)),
			verdict(r.allGone <= teardownLimit)},
		{"all deleted ÷ CRI teardown", fmt.Sprintf("%.2f×", r.allGone.Seconds()/r.floorRemove16.Seconds()),
			fmt.Sprintf("≤ %.2f×", teardownFloorFactor), verdict(r.allGone <= teardownLimit)},
		{"nodelet peak RSS", fmt.Sprintf("%.1f MiB", float64(r.peakRSS)/mib), fmt.Sprintf("≤ %d MiB", peakRSSTarget/mib), verdict(r.peakRSS <= peakRSSTarget)},
		{"nodelet peak RSS before the burst", fmt.Sprintf("%.1f MiB", float64(r.idleRSS)/mib), "", ""},
		{"RSS at the end: anonymous / file pages", fmt.Sprintf("%.1f / %.1f MiB", float64(r.rssAnon)/mib, float64(r.rssFile)/mib), "", ""},
		{"Go heap in use / Go sys at the end", fmt.Sprintf("%.1f / %.1f MiB", float64(r.heapInuse)/mib, float64(r.goSys)/mib), "", ""},
		{"nodelet CPU, create→all Ready", fmt.Sprintf("%.2fs", r.cpuStart.Seconds()), fmt.Sprintf("≤ %s", fmtDur(burstCPUTarget)), verdict(r.cpuStart <= burstCPUTarget)},
		{"nodelet CPU, whole burst", fmt.Sprintf("%.2fs", r.cpuTotal.Seconds()), "", ""},
		{"nodelet CPU at rest, 110 pods", fmt.Sprintf("%.3fs/s", r.cpuRest), "", ""},
		{"status writes/pod, create→all Ready", fmt.Sprintf("%.2f", r.writesPerPodStart), "", ""},
		{"status writes/pod, whole burst", fmt.Sprintf("%.2f", r.writesPerPodAll), fmt.Sprintf("≤ %.0f", writesPerPodLimit), verdict(r.writesPerPodAll <= writesPerPodLimit)},
		{"checkpoint writes/pod, start / teardown", fmt.Sprintf("%.2f / %.2f", r.checkpointsPerPodStart, r.checkpointsPerPodTeardown), "", ""},
		{"API requests/pod, create→all Ready", fmt.Sprintf("%.2f", r.requestsPerPodStart), "", ""},
		{"API requests/pod, whole burst", fmt.Sprintf("%.2f", r.requestsPerPodAll), "", ""},
		{"API requests/pod by verb, whole burst", r.requestsByVerb, "", ""},
		{"Events in the namespace/pod", fmt.Sprintf("%.2f", r.eventsPerPod), "", ""},
	})
}

// BenchmarkSinglePodStart starts one pod at a time on an idle node, 20
// times, against one sandbox and container started straight through the
// CRI, 20 times; the runs alternate so that both see the same machine load.
func BenchmarkSinglePodStart(b *testing.B) {
	c := startCluster(b)
	floor := newCRIFloor(b, c.ctrd)
	for i := range b.N {
		ctx := b.Context()
		n, stopNodelet := c.startNodelet(b, fmt.Sprintf("single-%d", i))
		ns := c.newNamespace(b, fmt.Sprintf("bench-single-%d", i))
		w := c.watchPods(b, ns)
		var pods, floors, gone []time.Duration
		for run := range singleRuns {
			d, err := floor.single(ctx)
			if err != nil {
				b.Fatalf("CRI floor, run %d: %v", run, err)
			}
			floors = append(floors, d)

			name := fmt.Sprintf("single-%02d", run)
			ready, deleted, err := c.startOne(ctx, w, ns, name)
			if err != nil {
				b.Fatalf("run %d: %v; nodelet log:\n%s", run, err, n.LogTail(40))
			}
			pods = append(pods, ready)
			gone = append(gone, deleted)
		}
		w.close()
		stopNodelet()

		p50, floor50 := percentile(pods, 50), percentile(floors, 50)
		diff := p50 - floor50
		printTable(fmt.Sprintf("single pod start (%d runs, node %s, %s)", singleRuns, benchNode, machine()), []row{
			{"CRI floor p50", fmtDur(floor50), "", ""},
			{"CRI floor min / max", fmtDur(slices.Min(floors)) + " / " + fmtDur(slices.Max(floors)), "", ""},
			{"create→Ready p50", fmtDur(p50), "", ""},
			{"create→Ready min / max", fmtDur(slices.Min(pods)) + " / " + fmtDur(slices.Max(pods)), "", ""},
			{"p50 − CRI floor p50", fmtDur(diff), "≤ " + fmtDur(singleOverFloor), verdict(diff <= singleOverFloor)},
			{"delete→gone p50 (grace 1s)", fmtDur(percentile(gone, 50)), "", ""},
		})
		b.ReportMetric(p50.Seconds()*1000, "ms-p50-ready")
		b.ReportMetric(floor50.Seconds()*1000, "ms-p50-cri-floor")
		b.ReportMetric(diff.Seconds()*1000, "ms-over-floor")
	}
}

// startOne creates one pod and returns how long until the watch saw it
// Ready, then deletes it and returns how long until the watch saw it gone.
func (c *cluster) startOne(ctx context.Context, w *podWatch, ns, name string) (ready, gone time.Duration, err error) {
	t0 := time.Now()
	if _, err := c.admin.CoreV1().Pods(ns).Create(ctx, sleeperPod(ns, name), metav1.CreateOptions{}); err != nil {
		return 0, 0, fmt.Errorf("creating pod %s: %w", name, err)
	}
	at, missing := w.waitAll([]string{name}, w.readyAt, podsTimeout)
	if missing > 0 {
		return 0, 0, fmt.Errorf("pod %s not Ready after %s", name, podsTimeout)
	}
	ready = at.Sub(t0)
	t1 := time.Now()
	if err := c.deletePod(ctx, ns, name); err != nil {
		return ready, 0, err
	}
	at, missing = w.waitAll([]string{name}, w.goneAt, podsTimeout)
	if missing > 0 {
		return ready, 0, fmt.Errorf("pod %s still in the API %s after deletion", name, podsTimeout)
	}
	return ready, at.Sub(t1), nil
}

// createAll creates a sleeper pod of each name in ns, createWorkers at a
// time, and returns when the first Create started and each pod's start
// (taken just before its Create call).
func (c *cluster) createAll(ctx context.Context, b *testing.B, ns string, names []string) (time.Time, map[string]time.Time) {
	b.Helper()
	var mu sync.Mutex
	created := make(map[string]time.Time, len(names))
	t0 := time.Now()
	err := forEach(len(names), createWorkers, func(j int) error {
		now := time.Now()
		mu.Lock()
		created[names[j]] = now
		mu.Unlock()
		_, err := c.admin.CoreV1().Pods(ns).Create(ctx, sleeperPod(ns, names[j]), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("creating pods: %v", err)
	}
	return t0, created
}
