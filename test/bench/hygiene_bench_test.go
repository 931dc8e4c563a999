package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// hygieneRest is how long the node sits with its pods running while
	// its CPU is read, once with the node-hygiene loops at their default
	// periods and once with them an hour apart.
	hygieneRest = time.Minute
	// evictionRuns is how many pods are evicted to time the delay from a
	// threshold crossed to the pod Failed.
	evictionRuns = 5
	// evictionInterval is evictionMonitoringInterval's default; the target
	// is two of them.
	evictionInterval = 10 * time.Second
)

// quietHygiene puts every periodic node-hygiene loop an hour apart, so a
// rest window of a minute sees none of them run after start.
var quietHygiene = map[string]any{
	"containerLogMonitorInterval": "1h",
	"containerGC":                 map[string]any{"period": "1h"},
	"imageGCPeriod":               "1h",
	"evictionMonitoringInterval":  "1h",
}

// hygieneResult is what BenchmarkNodeHygiene measured.
type hygieneResult struct {
	// cpuQuiet and cpuDefault are nodelet's CPU over hygieneRest with all
	// burst pods running, with the loops an hour apart and at their
	// defaults.
	cpuQuiet, cpuDefault time.Duration
	// delays run from a pod's write past its emptyDir sizeLimit (the CRI
	// log timestamp of the line it prints right after) to the pod seen
	// Failed with reason Evicted.
	delays []time.Duration
}

// BenchmarkNodeHygiene measures what keeping the node alive costs at rest
// with 110 pods (log rotation, container and image GC, eviction
// monitoring: the difference between a minute at their default periods and
// a minute with them an hour apart), and how long an emptyDir written past
// its sizeLimit stays before its pod is Failed.
func BenchmarkNodeHygiene(b *testing.B) {
	c := startCluster(b)
	for i := range b.N {
		var r hygieneResult
		r.cpuQuiet = c.restCPU(b, fmt.Sprintf("hygiene-quiet-%d", i), quietHygiene)
		r.cpuDefault = c.restCPU(b, fmt.Sprintf("hygiene-default-%d", i), nil)
		r.delays = c.evictionDelays(b, fmt.Sprintf("hygiene-evict-%d", i))
		printHygiene(r)
		b.ReportMetric((r.cpuDefault-r.cpuQuiet).Seconds()*float64(time.Minute)/float64(hygieneRest), "s-cpu/min-hygiene")
		b.ReportMetric(slices.Max(r.delays).Seconds(), "s-max-evict-delay")
	}
}

// restCPU fills a nodelet configured with cfg with burstPods sleepers and
// returns its CPU time over hygieneRest once all are Ready.
func (c *cluster) restCPU(b *testing.B, label string, cfg map[string]any) time.Duration {
	b.Helper()
	ctx := b.Context()
	n, stop := c.startNodeletWith(b, label, cfg)
	defer stop()
	ns := c.newNamespace(b, "bench-"+label)
	w := c.watchPods(b, ns)
	defer w.close()
	names := make([]string, burstPods)
	for j := range names {
		names[j] = fmt.Sprintf("sleeper-%03d", j)
	}
	if err := forEach(burstPods, createWorkers, func(j int) error {
		_, err := c.admin.CoreV1().Pods(ns).Create(ctx, sleeperPod(ns, names[j]), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("creating pods: %v", err)
	}
	if _, missing := w.waitAll(names, w.readyAt, podsTimeout); missing > 0 {
		b.Fatalf("%d of %d pods not Ready after %s; nodelet log:\n%s", missing, burstPods, podsTimeout, n.LogTail(60))
	}
	// Let the start's own work (status writes, first GC and monitor
	// rounds) settle before the window.
	time.Sleep(15 * time.Second)
	cpu := cpuOver(b, n, hygieneRest)
	if err := forEach(burstPods, createWorkers, func(j int) error { return c.deletePod(ctx, ns, names[j]) }); err != nil {
		b.Fatalf("deleting pods: %v", err)
	}
	if _, missing := w.waitAll(names, w.goneAt, podsTimeout); missing > 0 {
		b.Fatalf("%d of %d pods still in the API %s after deletion", missing, burstPods, podsTimeout)
	}
	return cpu
}

// evictionDelays evicts evictionRuns pods, one after the other, each for
// writing 2 MiB into an emptyDir limited to 1 MiB, on a nodelet with the
// default monitoring interval, and returns each delay.
func (c *cluster) evictionDelays(b *testing.B, label string) []time.Duration {
	b.Helper()
	ctx := b.Context()
	n, stop := c.startNodeletWith(b, label, nil)
	defer stop()
	ns := c.newNamespace(b, "bench-"+label)
	var delays []time.Duration
	for j := range evictionRuns {
		name := fmt.Sprintf("writer-%d", j)
		pod := sleeperPod(ns, name)
		limit := resource.MustParse("1Mi")
		pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		pod.Spec.Containers[0].Command = []string{"sh", "-c",
			"sleep 1; dd if=/dev/zero of=/scratch/fill bs=1M count=2 2>/dev/null; echo written; sleep 3600"}
		created, err := c.admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			b.Fatalf("creating %s: %v", name, err)
		}
		var failedAt time.Time
		deadline := time.Now().Add(podsTimeout)
		for failedAt.IsZero() {
			p, err := c.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.Status.Phase == corev1.PodFailed {
				if p.Status.Reason != "Evicted" {
					b.Fatalf("pod %s Failed with reason %q, want Evicted: %s", name, p.Status.Reason, p.Status.Message)
				}
				failedAt = time.Now()
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("pod %s not evicted after %s; nodelet log:\n%s", name, podsTimeout, n.LogTail(60))
			}
			time.Sleep(50 * time.Millisecond)
		}
		written, err := logLineTime(n, created, "written")
		if err != nil {
			b.Fatal(err)
		}
		delays = append(delays, failedAt.Sub(written))
		if err := c.deletePod(ctx, ns, name); err != nil {
			b.Fatalf("deleting %s: %v", name, err)
		}
	}
	return delays
}

// logLineTime returns the CRI timestamp of the first line of pod's
// container log holding marker.
func logLineTime(n *utils.Nodelet, pod *corev1.Pod, marker string) (time.Time, error) {
	pattern := filepath.Join(n.PodLogsDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), pod.Spec.Containers[0].Name, "*.log")
	files, _ := filepath.Glob(pattern)
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			ts, rest, ok := strings.Cut(sc.Text(), " ")
			if ok && strings.HasSuffix(rest, " "+marker) {
				_ = f.Close()
				return time.Parse(time.RFC3339Nano, ts)
			}
		}
		_ = f.Close()
	}
	return time.Time{}, fmt.Errorf("no %q line in %s", marker, pattern)
}

func printHygiene(r hygieneResult) {
	perMin := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * float64(time.Minute) / float64(hygieneRest))
	}
	cost := perMin(r.cpuDefault - r.cpuQuiet)
	sorted := slices.Clone(r.delays)
	slices.Sort(sorted)
	maxDelay := sorted[len(sorted)-1]
	var each []string
	for _, d := range r.delays {
		each = append(each, fmtDur(d))
	}
	printTable(fmt.Sprintf("Node hygiene at rest with %d pods, and eviction delay (%s)", burstPods, machine()), []row{
		{"CPU per minute, loops an hour apart", fmtDur(perMin(r.cpuQuiet)), "", ""},
		{"CPU per minute, default periods", fmtDur(perMin(r.cpuDefault)), "", ""},
		{"CPU per minute of log rotation, GC, eviction monitoring", fmtDur(cost), "", ""},
		{"sizeLimit passed → pod Failed, each", strings.Join(each, " "), "", ""},
		{"sizeLimit passed → pod Failed, median", fmtDur(sorted[len(sorted)/2]), "", ""},
		{"sizeLimit passed → pod Failed, max", fmtDur(maxDelay), "≤ " + fmtDur(2*evictionInterval), verdict(maxDelay <= 2*evictionInterval)},
	})
}
