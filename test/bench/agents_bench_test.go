package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

const (
	// scaleMaxPods is both agents' maxPods in BenchmarkSideBySide: the
	// scale curve's largest point. The private containerd's /24 holds
	// 253 pod addresses.
	scaleMaxPods = 250
	// restPods is the point whose pods sit at rest for restWindowLong, to
	// measure what an agent costs with nothing to do: a full node.
	restPods = scaleMaxPods
	// restSettle passes between the last pod Ready and the rest window.
	restSettle = 5 * time.Second
	// restWindowLong is the rest window: a whole syncFrequency (1 m) of
	// both agents, and the CPU counters' 10 ms ticks are 0.02 % of a
	// core over it.
	restWindowLong = time.Minute
	// idleSettle passes between the Node turning Ready and the idle
	// reading.
	idleSettle = 5 * time.Second
	// sideBySideSingleRuns is how often each agent and the floor start one
	// pod on an idle node.
	sideBySideSingleRuns = 10
	// kubeletPointsEnv, when set to a comma-separated list of pod counts,
	// replaces the kubelet's points of the curve (the default is all);
	// "none" leaves the kubelet out, to profile nodelet alone.
	kubeletPointsEnv = "NODELET_BENCH_KUBELET_POINTS"
	// densePodsEnv, when set to a pod count above scaleMaxPods (500, as
	// clouds allow), adds a burst of that many pods to the end of the
	// curve: both agents then get it as maxPods and the runtime enough
	// pod subnets. The goal's rows stay at goalPoints.
	densePodsEnv = "NODELET_BENCH_DENSE_PODS"
	// maxDensePods bounds densePodsEnv: what the harness's private
	// containerd and this machine kind are known to hold.
	maxDensePods = 1000

	// Targets against the kubelet (nodelet ÷ kubelet at most); the
	// wall-clock targets are against the CRI floor alone.
	rssVsKubelet      = 0.3
	cpuVsKubelet      = 0.3
	requestsVsKubelet = 0.5
	// cpuFlatFactor bounds the agent's CPU per pod at scaleMaxPods
	// against burstPods': a cost per pod that stays flat.
	cpuFlatFactor = 1.1
	// restCPUTarget is nodelet's CPU at rest with restPods pods, in cores.
	restCPUTarget = 0.003
	// superlinearFactor: a curve whose last segment costs more per pod
	// than this times the least-squares slope grows faster than linear.
	superlinearFactor = 1.3
)

// curvePoints are the scale curve's bursts, after the idle point (0 pods);
// goalPoints those the goal's wall-clock, memory and request figures are
// read at, with their peak RSS targets.
var (
	curvePoints    = []int{10, 50, burstPods, scaleMaxPods}
	goalPoints     = []int{burstPods, scaleMaxPods}
	peakRSSTargets = map[int]int64{burstPods: peakRSSTarget, scaleMaxPods: peakRSSTarget250}
)

// point is what one burst of pods through an agent measured.
type point struct {
	pods int
	// allReady runs from the first Create to the last pod seen Ready,
	// allGone from the first Delete to the last pod seen gone; toReady
	// holds each pod's create→Ready.
	allReady, allGone time.Duration
	toReady           []time.Duration
	// cpuStart is the agent's CPU from the first Create to all Ready,
	// cpuTeardown from the first Delete to all gone.
	cpuStart, cpuTeardown time.Duration
	// machineStart is where the machine's CPU went from the first Create
	// to all Ready; criCallsStart are the agent's CRI calls over it (NaN
	// when the agent's metrics could not be read).
	machineStart  cpuSplit
	criCallsStart float64
	// mem is the agent's memory when all were Ready; peak its VmHWM once
	// all were gone; heapInuse and goSys the Go runtime's view when all
	// were Ready (zero when the agent does not tell).
	mem              memSplit
	peak             int64
	heapInuse, goSys int64
	// requests are the agent's API requests over the start and the
	// teardown, in total ("") and per verb ("/GET", …).
	requests map[string]float64
	// restCPU (cores) and restRSS are measured with all pods running
	// for restWindowLong; zero for points without a rest window.
	restCPU float64
	restRSS int64
}

// agentRun is one agent's part of BenchmarkSideBySide.
type agentRun struct {
	name string
	// idle is the agent's memory when registered, before any pod.
	idle memSplit
	// single holds create→Ready of one pod at a time on the idle node.
	single []time.Duration
	points []point
}

// at returns the point with pods pods.
func (r agentRun) at(pods int) (point, bool) {
	for _, p := range r.points {
		if p.pods == pods {
			return p, true
		}
	}
	return point{}, false
}

// floorRun is the CRI floor's part: a burst per curve point and single
// pods.
type floorRun struct {
	bursts map[int]floorBurst
	single []time.Duration
}

// BenchmarkSideBySide runs the real kubelet of the pinned version and
// nodelet, one after the other, on the same API server and containerd
// with the same settings (sharedAgentSettings), after the CRI floor, and
// measures each the same way: single pods on the idle node, then bursts of
// 10, 50, 110 and 250 pods (the last with a rest window), each created at
// once and deleted at once. It prints one table of the goal's figures with the
// floor, the kubelet and nodelet side by side, and each agent's scale
// curve with its marginal cost per pod.
func BenchmarkSideBySide(b *testing.B) {
	points, err := sideBySidePoints(os.Getenv(densePodsEnv))
	if err != nil {
		b.Fatalf("%s: %v", densePodsEnv, err)
	}
	c := startClusterFor(b, points[len(points)-1])
	floor := newCRIFloor(b, c.ctrd)
	kubeletPoints, err := parsePoints(os.Getenv(kubeletPointsEnv), points)
	if err != nil {
		b.Fatalf("%s: %v", kubeletPointsEnv, err)
	}
	for i := range b.N {
		ctx := b.Context()
		loadBefore := loadAverage()
		// The floor first, with no agent running: the kubelet removes
		// sandboxes it did not make.
		fr := floorRun{bursts: map[int]floorBurst{}}
		for _, n := range points {
			r, err := floor.timedBurst(ctx, n, criWorkers)
			if err != nil {
				b.Fatalf("CRI floor, %d pods: %v", n, err)
			}
			fr.bursts[n] = r
		}
		for run := range sideBySideSingleRuns {
			d, err := floor.single(ctx)
			if err != nil {
				b.Fatalf("CRI floor, single pod %d: %v", run, err)
			}
			fr.single = append(fr.single, d)
		}
		nodelet := c.runAgent(b, floor, nodeletAgentName, i, points)
		kubelet := agentRun{name: kubeletAgentName}
		if len(kubeletPoints) > 0 {
			kubelet = c.runAgent(b, floor, kubeletAgentName, i, kubeletPoints)
		}

		header := fmt.Sprintf("%s; load average %s before, %s after (the machine is shared)",
			machineDetails(floor.runtimeVersion(ctx)), loadBefore, loadAverage())
		printSideBySide(fmt.Sprintf("nodelet beside the kubelet (node %s, %d pods; %s)", benchNode, burstPods, header),
			sideBySideFigures(fr, kubelet, nodelet, points))
		fmt.Println("settings that differ:")
		for _, d := range agentDifferences {
			fmt.Println("  - " + d)
		}
		for _, r := range []agentRun{nodelet, kubelet} {
			printCurve(r, fr, c.maxPods)
		}

		if p, ok := nodelet.at(burstPods); ok {
			b.ReportMetric(p.allReady.Seconds(), "s-nodelet-all-ready")
			b.ReportMetric(float64(p.peak)/mib, "MiB-nodelet-peak-rss")
			if k, ok := kubelet.at(burstPods); ok {
				b.ReportMetric(p.allReady.Seconds()/k.allReady.Seconds(), "x-kubelet-all-ready")
				b.ReportMetric(float64(p.peak)/float64(k.peak), "x-kubelet-peak-rss")
				b.ReportMetric(p.cpuStart.Seconds()/k.cpuStart.Seconds(), "x-kubelet-cpu-start")
			}
		}
	}
}

// runAgent starts the named agent, measures it and stops it, leaving the
// API server and containerd as before.
func (c *cluster) runAgent(b *testing.B, floor *criFloor, name string, iter int, points []int) agentRun {
	b.Helper()
	ctx := b.Context()
	ag := c.startAgent(b, floor, name, fmt.Sprintf("sidebyside-%d", iter))
	run := agentRun{name: name}
	time.Sleep(idleSettle)
	run.idle = readMemSplit(ag.pid())

	ns := c.newNamespace(b, fmt.Sprintf("sbs-%s-%d-single", name, iter))
	w := c.watchPods(b, ns)
	for r := range sideBySideSingleRuns {
		ready, _, err := c.startOne(ctx, w, ns, fmt.Sprintf("single-%02d", r))
		if err != nil {
			b.Fatalf("%s, single pod %d: %v; %s log:\n%s", name, r, err, name, ag.logTail(40))
		}
		run.single = append(run.single, ready)
	}
	w.close()

	for _, n := range points {
		ns := c.newNamespace(b, fmt.Sprintf("sbs-%s-%d-%d", name, iter, n))
		var rest time.Duration
		if n == restPods {
			rest = restWindowFor(b, restWindowLong)
		}
		run.points = append(run.points, c.burstOn(b, ag, ns, n, rest))
	}
	ag.stop()
	if err := c.forgetNode(ctx, floor); err != nil {
		b.Fatalf("clearing up after %s: %v", name, err)
	}
	return run
}

// startAgent starts the named agent for benchNode and waits for its Node to
// be Ready; label names its kept log.
func (c *cluster) startAgent(b *testing.B, floor *criFloor, name, label string) agent {
	b.Helper()
	switch name {
	case nodeletAgentName:
		return c.startNodeletAgent(b, label)
	case kubeletAgentName:
		return c.startKubeletAgent(b, label, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), agentStopTimeout)
			defer cancel()
			return floor.clearRuntime(ctx)
		})
	}
	b.Fatalf("no agent %q", name)
	return nil
}

// burstOn creates n sleeper pods at once in ns, waits for all to be Ready,
// optionally lets them rest for rest, deletes them at once and waits for
// all to be gone, reading the agent's usage and the API server's request
// counters between the phases.
func (c *cluster) burstOn(b *testing.B, ag agent, ns string, n int, rest time.Duration) point {
	b.Helper()
	ctx := b.Context()
	w := c.watchPods(b, ns)
	defer w.close()
	names := make([]string, n)
	for j := range names {
		names[j] = fmt.Sprintf("sleeper-%03d", j)
	}
	usage := func() time.Duration {
		u, err := processCPU(ag.pid())
		if err != nil {
			b.Fatalf("reading the usage of %s: %v", ag.name(), err)
		}
		return u
	}
	requests := func() map[string]float64 {
		r, err := c.apiRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	p := point{pods: n}

	stopProfile := func() {}
	if a, ok := ag.(*nodeletAgent); ok {
		stopProfile = profileWindow(b, a.n, fmt.Sprintf("sbs-%d-start", n))
	}
	split := func() cpuSplit {
		s, err := readCPUSplit()
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	calls0, callsOK0 := ag.runtimeCalls()
	split0, cpu0, req0 := split(), usage(), requests()
	t0, created := c.createAll(ctx, b, ns, names)
	lastReady, missing := w.waitAll(names, w.readyAt, podsTimeout)
	cpu1, split1, req1 := usage(), split(), requests()
	stopProfile()
	p.machineStart = split1.sub(split0)
	p.criCallsStart = nan
	if calls1, ok := ag.runtimeCalls(); ok && callsOK0 {
		p.criCallsStart = calls1 - calls0
	}
	if missing > 0 {
		b.Fatalf("%s: %d of %d pods not Ready after %s; log:\n%s", ag.name(), missing, n, podsTimeout, ag.logTail(60))
	}
	p.allReady = lastReady.Sub(t0)
	for _, name := range names {
		at, _ := w.readyAt(name)
		p.toReady = append(p.toReady, at.Sub(created[name]))
	}
	p.cpuStart = cpu1 - cpu0
	p.mem = readMemSplit(ag.pid())
	p.heapInuse, p.goSys, _ = ag.goMemory()

	if rest > 0 {
		time.Sleep(restSettle)
		stopRest := func() {}
		if a, ok := ag.(*nodeletAgent); ok {
			// One CPU profile over the whole window: fetching one a
			// second would be most of what a node at rest records.
			stopRest = profileWindowChunked(b, a.n, fmt.Sprintf("sbs-%d-rest", n), int(rest/time.Second))
		}
		r0 := usage()
		time.Sleep(rest)
		p.restCPU = (usage() - r0).Seconds() / rest.Seconds()
		p.restRSS = readMemSplit(ag.pid()).rss
		stopRest()
	}

	if a, ok := ag.(*nodeletAgent); ok {
		stopProfile = profileWindow(b, a.n, fmt.Sprintf("sbs-%d-teardown", n))
	}
	cpu2, req2 := usage(), requests()
	t1 := time.Now()
	err := forEach(n, createWorkers, func(j int) error { return c.deletePod(ctx, ns, names[j]) })
	if err != nil {
		b.Fatalf("deleting pods: %v", err)
	}
	lastGone, missing := w.waitAll(names, w.goneAt, podsTimeout)
	if missing > 0 {
		b.Fatalf("%s: %d of %d pods still in the API %s after deletion; log:\n%s", ag.name(), missing, n, podsTimeout, ag.logTail(60))
	}
	p.allGone = lastGone.Sub(t1)
	cpu3, req3 := usage(), requests()
	stopProfile()
	p.cpuTeardown = cpu3 - cpu2
	p.peak = readMemSplit(ag.pid()).peak

	ownStart := map[string]float64{"": float64(n), "/POST": float64(n)}
	ownTeardown := map[string]float64{"": float64(n), "/DELETE": float64(n)}
	p.requests = agentRequests(req0, req1, ownStart)
	for k, v := range agentRequests(req2, req3, ownTeardown) {
		p.requests[k] += v
	}
	return p
}

// processCPU is a process's user+system CPU time, with that of the child
// processes it has waited for (mount, iptables and the like, which an
// agent runs as commands).
func processCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, errors.New("the agent is not running")
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	return parseStatCPU(string(stat))
}

// parseStatCPU reads utime, stime, cutime and cstime from the text of
// /proc/<pid>/stat and returns their sum.
func parseStatCPU(stat string) (time.Duration, error) {
	// The fields after the command name, which is in parentheses and may
	// hold spaces and parentheses itself.
	end := strings.LastIndexByte(stat, ')')
	if end < 0 || end+2 > len(stat) {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[end+2:])
	// state is field 3 of proc(5), fields[0] here: utime..cstime are
	// fields 14..17.
	if len(fields) < 15 {
		return 0, fmt.Errorf("too few fields in %q", stat)
	}
	var ticks int64
	for _, f := range fields[11:15] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading CPU ticks %q: %w", f, err)
		}
		ticks += v
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clkTck, nil
}

// sideBySidePoints is the side-by-side curve: curvePoints, and the dense
// point that dense (densePodsEnv) names, if any.
func sideBySidePoints(dense string) ([]int, error) {
	if strings.TrimSpace(dense) == "" {
		return curvePoints, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(dense))
	if err != nil || n <= scaleMaxPods || n > maxDensePods {
		return nil, fmt.Errorf("%q: want a pod count above %d and at most %d", dense, scaleMaxPods, maxDensePods)
	}
	return append(slices.Clone(curvePoints), n), nil
}

// parsePoints reads a comma-separated list of pod counts, each one of
// allowed; empty is all of allowed.
func parsePoints(s string, allowed []int) ([]int, error) {
	switch strings.TrimSpace(s) {
	case "":
		return allowed, nil
	case "none":
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || !slices.Contains(allowed, n) {
			return nil, fmt.Errorf("%q is not one of %v", f, allowed)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// figure is one row of the side-by-side table: one quantity for the CRI
// floor, the kubelet and nodelet (NaN where it has no meaning or was not
// measured) and nodelet's targets (zero: none).
type figure struct {
	name                    string
	floor, kubelet, nodelet float64
	format                  func(float64) string
	// maxVsFloor and maxVsKubelet bound nodelet ÷ floor and nodelet ÷
	// kubelet; maxValue bounds nodelet's value; maxOverFloor bounds
	// nodelet − floor.
	maxVsFloor, maxVsKubelet, maxValue, maxOverFloor float64
	// mustBeZero: nodelet's value must be 0.
	mustBeZero bool
	// note is the target column of a row without a bound.
	note string
}

// nan marks a value a column does not have.
var nan = math.NaN()

func known(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// quotient is a ÷ b, NaN when either is unknown or b is not positive.
func quotient(a, b float64) float64 {
	if !known(a) || !known(b) || b <= 0 {
		return nan
	}
	return a / b
}

// target describes the row's bounds.
func (f figure) target() string {
	var parts []string
	if f.maxVsFloor > 0 {
		parts = append(parts, fmt.Sprintf("≤ %.2f× floor", f.maxVsFloor))
	}
	if f.maxOverFloor > 0 {
		parts = append(parts, "≤ floor + "+f.format(f.maxOverFloor))
	}
	if f.maxValue > 0 {
		parts = append(parts, "≤ "+f.format(f.maxValue))
	}
	if f.maxVsKubelet > 0 {
		parts = append(parts, fmt.Sprintf("≤ %.2f× kubelet", f.maxVsKubelet))
	}
	if f.mustBeZero {
		parts = append(parts, "0")
	}
	if len(parts) == 0 {
		return f.note
	}
	return strings.Join(parts, ", ")
}

// met is "ok" when nodelet meets every bound of the row, "MISSED" when it
// misses one, "n/a" when a value a bound needs is missing, and empty for
// a row without bounds.
func (f figure) met() string {
	bounded, missed, unknown := false, false, false
	check := func(bound, value float64) {
		if bound <= 0 {
			return
		}
		bounded = true
		switch {
		case !known(value):
			unknown = true
		case value > bound:
			missed = true
		}
	}
	check(f.maxVsFloor, quotient(f.nodelet, f.floor))
	check(f.maxVsKubelet, quotient(f.nodelet, f.kubelet))
	check(f.maxValue, f.nodelet)
	over := nan
	if known(f.nodelet) && known(f.floor) {
		over = f.nodelet - f.floor
	}
	check(f.maxOverFloor, over)
	if f.mustBeZero {
		bounded = true
		switch {
		case !known(f.nodelet):
			unknown = true
		case f.nodelet != 0:
			missed = true
		}
	}
	switch {
	case !bounded:
		return ""
	case missed:
		return "MISSED"
	case unknown:
		return "n/a"
	}
	return "ok"
}

func fmtSeconds(v float64) string { return fmtDur(time.Duration(v * float64(time.Second))) }
func fmtMiB(v float64) string     { return fmt.Sprintf("%.1f MiB", v/mib) }
func fmtKiB(v float64) string     { return fmt.Sprintf("%.0f KiB", v/1024) }
func fmtCore(v float64) string    { return fmt.Sprintf("%.2f %% of a core", v*100) }
func fmtPerPod(v float64) string  { return fmt.Sprintf("%.2f", v) }
func fmtMillis(v float64) string  { return fmt.Sprintf("%.1f ms", v*1000) }

// sideBySideFigures are the table's rows: the goal's figures at goalPoints,
// the agent's CPU per pod along the curve's points, the rest at restPods,
// the single pod, the memory split and the marginal cost per pod.
func sideBySideFigures(fr floorRun, kubelet, nodelet agentRun, points []int) []figure {
	// each reads one quantity of an agent's point, NaN without it.
	each := func(pods int, get func(point) float64) (k, n float64) {
		k, n = nan, nan
		if p, ok := kubelet.at(pods); ok {
			k = get(p)
		}
		if p, ok := nodelet.at(pods); ok {
			n = get(p)
		}
		return k, n
	}
	floorAt := func(pods int, get func(floorBurst) float64) float64 {
		if r, ok := fr.bursts[pods]; ok {
			return get(r)
		}
		return nan
	}
	row := func(f figure, pods int, get func(point) float64) figure {
		f.kubelet, f.nodelet = each(pods, get)
		return f
	}
	seconds := func(d time.Duration) float64 { return d.Seconds() }
	pct := func(ds []time.Duration, p float64) float64 {
		if len(ds) == 0 {
			return nan
		}
		return percentile(ds, p).Seconds()
	}
	perPod := func(p point, key string) float64 { return p.requests[key] / float64(p.pods) }
	goValue := func(v int64) float64 {
		if v == 0 {
			return nan
		}
		return float64(v)
	}
	// The goal's wall-clock, memory and request figures, at each of the
	// points it names; a dense point past them gets the same rows,
	// without targets.
	var figs []figure
	rowPoints := slices.Clone(goalPoints)
	for _, n := range points {
		if n > scaleMaxPods {
			rowPoints = append(rowPoints, n)
		}
	}
	for _, n := range rowPoints {
		pods := fmt.Sprintf("%d pods", n)
		target := func(v float64) float64 {
			if slices.Contains(goalPoints, n) {
				return v
			}
			return 0
		}
		figs = append(figs,
			row(figure{name: pods + " all Ready", floor: floorAt(n, func(r floorBurst) float64 { return r.start.Seconds() }),
				format: fmtSeconds, maxVsFloor: target(burstFloorFactor)},
				n, func(p point) float64 { return seconds(p.allReady) }),
			row(figure{name: "create→Ready p50 of the " + pods, floor: floorAt(n, func(r floorBurst) float64 { return pct(r.running, 50) }),
				format: fmtSeconds, maxVsFloor: target(burstFloorFactor)},
				n, func(p point) float64 { return pct(p.toReady, 50) }),
			row(figure{name: "create→Ready p99 of the " + pods, floor: floorAt(n, func(r floorBurst) float64 { return pct(r.running, 99) }),
				format: fmtSeconds, maxVsFloor: target(burstFloorFactor)},
				n, func(p point) float64 { return pct(p.toReady, 99) }),
			row(figure{name: pods + " all gone (grace 1 s)", floor: floorAt(n, func(r floorBurst) float64 { return r.remove.Seconds() }),
				format: fmtSeconds, maxVsFloor: target(teardownFloorFactor)},
				n, func(p point) float64 { return seconds(p.allGone) }),
			row(figure{name: "peak RSS at " + pods, floor: nan, format: fmtMiB, maxValue: float64(peakRSSTargets[n]), maxVsKubelet: target(rssVsKubelet)},
				n, func(p point) float64 { return float64(p.peak) }),
			row(figure{name: "API requests/pod, " + pods + " start+teardown", floor: nan, format: fmtPerPod, maxVsKubelet: target(requestsVsKubelet)},
				n, func(p point) float64 { return perPod(p, "") }),
		)
	}
	// The agent's CPU per pod along the curve: flat, and a fraction of
	// the kubelet's.
	for _, phase := range []struct {
		name string
		cpu  func(point) time.Duration
	}{
		{"start", func(p point) time.Duration { return p.cpuStart }},
		{"teardown", func(p point) time.Duration { return p.cpuTeardown }},
	} {
		perPodCPU := func(p point) float64 { return seconds(phase.cpu(p)) / float64(p.pods) }
		for _, n := range points {
			vsKubelet := cpuVsKubelet
			if n > scaleMaxPods {
				vsKubelet = 0
			}
			figs = append(figs, row(figure{name: fmt.Sprintf("agent CPU/pod, %d-pod %s", n, phase.name), floor: nan, format: fmtMillis, maxVsKubelet: vsKubelet},
				n, perPodCPU))
		}
		k250, n250 := each(scaleMaxPods, perPodCPU)
		k110, n110 := each(burstPods, perPodCPU)
		figs = append(figs, figure{name: fmt.Sprintf("… %d-pod ÷ %d-pod (flat)", scaleMaxPods, burstPods), floor: nan,
			kubelet: quotient(k250, k110), nodelet: quotient(n250, n110),
			format: func(v float64) string { return fmt.Sprintf("%.2f×", v) }, maxValue: cpuFlatFactor})
		for _, n := range points {
			if n <= scaleMaxPods {
				continue
			}
			k, v := each(n, perPodCPU)
			figs = append(figs, figure{name: fmt.Sprintf("… %d-pod ÷ %d-pod", n, burstPods), floor: nan,
				kubelet: quotient(k, k110), nodelet: quotient(v, n110),
				format: func(v float64) string { return fmt.Sprintf("%.2f×", v) }})
		}
	}
	n110 := fmt.Sprintf("%d pods", burstPods)
	figs = append(figs,
		row(figure{name: fmt.Sprintf("agent CPU at rest, %d pods", restPods), floor: nan, format: fmtCore, maxValue: restCPUTarget},
			restPods, func(p point) float64 { return p.restCPU }),
		row(figure{name: fmt.Sprintf("RSS at rest, %d pods", restPods), floor: nan, format: fmtMiB},
			restPods, func(p point) float64 { return float64(p.restRSS) }),
		row(figure{name: "create→Ready p90 of the " + n110, floor: floorAt(burstPods, func(r floorBurst) float64 { return pct(r.running, 90) }),
			format: fmtSeconds},
			burstPods, func(p point) float64 { return pct(p.toReady, 90) }),
		row(figure{name: "agent CPU, " + n110 + " start", floor: nan, format: fmtSeconds},
			burstPods, func(p point) float64 { return seconds(p.cpuStart) }),
		row(figure{name: "agent CPU, " + n110 + " teardown", floor: nan, format: fmtSeconds},
			burstPods, func(p point) float64 { return seconds(p.cpuTeardown) }),
		row(figure{name: "machine CPU, " + n110 + " start (every process)", floor: floorAt(burstPods, func(r floorBurst) float64 { return seconds(r.cpuStart.machine) }),
			format: fmtSeconds},
			burstPods, func(p point) float64 { return seconds(p.machineStart.machine) }),
		row(figure{name: "… API server and etcd", floor: floorAt(burstPods, func(r floorBurst) float64 { return seconds(r.cpuStart.controlPlane) }),
			format: fmtSeconds},
			burstPods, func(p point) float64 { return seconds(p.machineStart.controlPlane) }),
		row(figure{name: "… the benchmark (floor: its CRI calls)", floor: floorAt(burstPods, func(r floorBurst) float64 { return seconds(r.cpuStart.bench) }),
			format: fmtSeconds},
			burstPods, func(p point) float64 { return seconds(p.machineStart.bench) }),
		row(figure{name: "… the rest (runtime, kernel, other work)", floor: floorAt(burstPods, func(r floorBurst) float64 { return seconds(r.cpuStart.rest(0)) }),
			format: fmtSeconds},
			burstPods, func(p point) float64 { return seconds(p.machineStart.rest(p.cpuStart)) }),
		row(figure{name: "CRI calls/pod, " + n110 + " start", floor: floorAt(burstPods, func(r floorBurst) float64 { return float64(r.criCalls) / float64(burstPods) }),
			format: fmtPerPod},
			burstPods, func(p point) float64 { return p.criCallsStart / float64(p.pods) }),
		row(figure{name: "… of them PATCH (status), " + n110, floor: nan, format: fmtPerPod},
			burstPods, func(p point) float64 { return perPod(p, "/PATCH") }),
		row(figure{name: "… of them POST (Events), " + n110, floor: nan, format: fmtPerPod},
			burstPods, func(p point) float64 { return perPod(p, "/POST") }),
		row(figure{name: "RSS at " + n110 + " all Ready", floor: nan, format: fmtMiB},
			burstPods, func(p point) float64 { return float64(p.mem.rss) }),
		row(figure{name: "… anonymous (RssAnon)", floor: nan, format: fmtMiB},
			burstPods, func(p point) float64 { return float64(p.mem.anon) }),
		row(figure{name: "… file pages (RssFile)", floor: nan, format: fmtMiB},
			burstPods, func(p point) float64 { return float64(p.mem.file) }),
		row(figure{name: "Go heap in use at " + n110, floor: nan, format: fmtMiB},
			burstPods, func(p point) float64 { return goValue(p.heapInuse) }),
		row(figure{name: "Go sys at " + n110, floor: nan, format: fmtMiB},
			burstPods, func(p point) float64 { return goValue(p.goSys) }),
	)
	kc, nc := curveOf(kubelet), curveOf(nodelet)
	figs = append(figs,
		figure{name: "marginal RSS per pod", floor: nan, kubelet: kc.rss.slope, nodelet: nc.rss.slope, format: fmtKiB, note: "printed"},
		figure{name: "marginal CPU per pod", floor: nan, kubelet: kc.cpu.slope, nodelet: nc.cpu.slope, format: fmtMillis, note: "printed"},
		figure{name: "RSS last segment ÷ marginal", floor: nan, kubelet: kc.rssGrowth, nodelet: nc.rssGrowth,
			format: func(v float64) string { return fmt.Sprintf("%.2f×", v) }, maxValue: superlinearFactor},
		figure{name: "CPU last segment ÷ marginal", floor: nan, kubelet: kc.cpuGrowth, nodelet: nc.cpuGrowth,
			format: func(v float64) string { return fmt.Sprintf("%.2f×", v) }, maxValue: superlinearFactor},
		figure{name: "single pod on an idle node, create→Ready p50", floor: pct(fr.single, 50), kubelet: pct(kubelet.single, 50), nodelet: pct(nodelet.single, 50),
			format: fmtSeconds, maxOverFloor: singleOverFloor.Seconds()},
	)
	return figs
}

// printSideBySide writes the table to stdout.
func printSideBySide(title string, figs []figure) {
	fmt.Println()
	fmt.Println(title)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tCRI floor\tkubelet\tnodelet\tnodelet/floor\tnodelet/kubelet\ttarget\tmet?\t")
	show := func(v float64) string {
		if !known(v) {
			return "—"
		}
		return ""
	}
	for _, f := range figs {
		cell := func(v float64) string {
			if s := show(v); s != "" {
				return s
			}
			return f.format(v)
		}
		times := func(v float64) string {
			if !known(v) {
				return "—"
			}
			return fmt.Sprintf("%.2f×", v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f.name, cell(f.floor), cell(f.kubelet), cell(f.nodelet),
			times(quotient(f.nodelet, f.floor)), times(quotient(f.nodelet, f.kubelet)), f.target(), f.met())
	}
	_ = tw.Flush()
	fmt.Println()
}

// machineDetails describes the host and the runtime for table headers.
func machineDetails(runtimeVersion string) string {
	kernel := "unknown kernel"
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(data))
	}
	return fmt.Sprintf("%s, %s, %s, %s", time.Now().UTC().Format("2006-01-02 15:04 MST"), cpuModel(), kernel, runtimeVersion) +
		fmt.Sprintf(", %d cores", runtime.NumCPU())
}

// cpuModel is the first model name of /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
