package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// cmPods pods each mount the shared ConfigMap and one of their own.
	cmPods = 100
	// warmPods are started once the store holds every object they name.
	warmPods = 10
	// propagationRounds updates of the shared ConfigMap are timed one at a
	// time.
	propagationRounds = 20
	// stormRate and stormWindow: updates a second to the shared ConfigMap,
	// and for how long.
	stormRate   = 100
	stormWindow = 10 * time.Second
	// volumePoll is how often the benchmark reads every pod's volume file.
	volumePoll = 5 * time.Millisecond
	// propagationTimeout bounds one update reaching every pod.
	propagationTimeout = 30 * time.Second

	// Targets.
	propagationP99Target = time.Second
)

// cmResult is what BenchmarkConfigMapVolumes measured.
type cmResult struct {
	watches, distinct      int
	getsPerWarmStart       float64
	storeGetsPerWarmStart  float64
	perPod                 []time.Duration
	allPods                []time.Duration
	stormUpdates           int
	stormCPU               time.Duration
	stormConverged         time.Duration
	stormLastEverywhere    int
	stormReconciles        float64
	stormPodSyncsPerUpdate float64
}

// BenchmarkConfigMapVolumes runs 100 pods that mount one shared ConfigMap
// and one ConfigMap each, then measures the watches nodelet holds, the API
// GETs of pod starts once the store is warm, how fast an update of the
// shared ConfigMap reaches every pod's volume, and an update storm of 100
// a second: nodelet's CPU and whether the last value wins everywhere.
func BenchmarkConfigMapVolumes(b *testing.B) {
	c := startCluster(b)
	for i := range b.N {
		ctx := b.Context()
		n, stop := c.startNodelet(b, fmt.Sprintf("configmaps-%d", i))
		ns := c.newNamespace(b, fmt.Sprintf("bench-configmaps-%d", i))
		w := c.watchPods(b, ns)
		var r cmResult

		shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, Data: map[string]string{"value": "v0"}}
		var err error
		if shared, err = c.admin.CoreV1().ConfigMaps(ns).Create(ctx, shared, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		names := make([]string, cmPods)
		err = forEach(cmPods, createWorkers, func(j int) error {
			names[j] = fmt.Sprintf("pod-%03d", j)
			own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("own-%03d", j), Namespace: ns}, Data: map[string]string{"value": "mine"}}
			if _, err := c.admin.CoreV1().ConfigMaps(ns).Create(ctx, own, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := c.admin.CoreV1().Pods(ns).Create(ctx, cmPod(ns, names[j], own.Name), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatalf("creating pods: %v", err)
		}
		if _, missing := w.waitAll(names, w.readyAt, podsTimeout); missing > 0 {
			b.Fatalf("%d of %d pods not Ready; nodelet log:\n%s", missing, cmPods, n.LogTail(60))
		}
		r.distinct = cmPods + 1
		if r.watches, err = configMapWatches(ctx, n); err != nil {
			b.Fatal(err)
		}

		// Pods whose objects the store holds already: the shared one and
		// the own ConfigMap of a running pod.
		m0, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}
		warm := make([]string, warmPods)
		err = forEach(warmPods, createWorkers, func(j int) error {
			warm[j] = fmt.Sprintf("warm-%03d", j)
			_, err := c.admin.CoreV1().Pods(ns).Create(ctx, cmPod(ns, warm[j], fmt.Sprintf("own-%03d", j)), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatalf("creating warm pods: %v", err)
		}
		if _, missing := w.waitAll(warm, w.readyAt, podsTimeout); missing > 0 {
			b.Fatalf("%d of %d warm pods not Ready", missing, warmPods)
		}
		m1, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}
		r.getsPerWarmStart = (m1["rest_client_requests_total/GET"] - m0["rest_client_requests_total/GET"]) / warmPods
		r.storeGetsPerWarmStart = (m1["nodelet_object_store_get_requests_total"] - m0["nodelet_object_store_get_requests_total"]) / warmPods

		files := sharedFiles(b, c, n, ns, append(names, warm...))

		// One update at a time: API update → the value in each volume.
		for round := 1; round <= propagationRounds; round++ {
			value := fmt.Sprintf("v%d", round)
			shared.Data = map[string]string{"value": value}
			t0 := time.Now()
			if shared, err = c.admin.CoreV1().ConfigMaps(ns).Update(ctx, shared, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			seen, ok := waitForValue(files, value, propagationTimeout)
			if !ok {
				b.Fatalf("update %d not in every volume after %s", round, propagationTimeout)
			}
			var last time.Duration
			for _, at := range seen {
				r.perPod = append(r.perPod, at.Sub(t0))
				last = max(last, at.Sub(t0))
			}
			r.allPods = append(r.allPods, last)
		}

		// The storm: stormRate updates a second, then the last value
		// must be in every volume.
		before, err := n.Usage()
		if err != nil {
			b.Fatal(err)
		}
		s0, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}
		tick := time.NewTicker(time.Second / stormRate)
		var value string
		for end := time.Now().Add(stormWindow); time.Now().Before(end); <-tick.C {
			r.stormUpdates++
			value = fmt.Sprintf("storm-%d", r.stormUpdates)
			shared.Data = map[string]string{"value": value}
			if shared, err = c.admin.CoreV1().ConfigMaps(ns).Update(ctx, shared, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		stormEnd := time.Now()
		seen, _ := waitForValue(files, value, propagationTimeout)
		for _, at := range seen {
			r.stormConverged = max(r.stormConverged, at.Sub(stormEnd))
		}
		r.stormLastEverywhere = len(seen)
		after, err := n.Usage()
		if err != nil {
			b.Fatal(err)
		}
		s1, err := nodeletMetrics(n)
		if err != nil {
			b.Fatal(err)
		}
		r.stormCPU = after.CPU - before.CPU
		r.stormReconciles = s1["controller_runtime_reconcile_total/configmap"] - s0["controller_runtime_reconcile_total/configmap"]
		r.stormPodSyncsPerUpdate = (s1["nodelet_pod_worker_syncs_total"] - s0["nodelet_pod_worker_syncs_total"]) / float64(r.stormUpdates)

		w.close()
		stop()
		printConfigMaps(r, len(files))
	}
}

// cmPod is a sleeper pod mounting the shared ConfigMap and own.
func cmPod(ns, name, own string) *corev1.Pod {
	p := sleeperPod(ns, name)
	p.Spec.Volumes = []corev1.Volume{
		{Name: "shared", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}},
		{Name: "own", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: own}}}},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}, {Name: "own", MountPath: "/own"}}
	return p
}

// sharedFiles returns the path of the shared ConfigMap's file in the
// volume of each named pod, on the node: what the container sees.
func sharedFiles(b *testing.B, c *cluster, n *utils.Nodelet, ns string, names []string) []string {
	b.Helper()
	var files []string
	for _, name := range names {
		p, err := c.admin.CoreV1().Pods(ns).Get(b.Context(), name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, volumeFile(n, p.UID))
	}
	return files
}

func volumeFile(n *utils.Nodelet, uid types.UID) string {
	return filepath.Join(n.RootDir, "pods", string(uid), "volumes", "kubernetes.io~configmap", "shared", "value")
}

// waitForValue reads every file each volumePoll until all hold value or
// timeout passes, and returns when each was first seen with it and
// whether all were.
func waitForValue(files []string, value string, timeout time.Duration) ([]time.Time, bool) {
	seen := make([]time.Time, len(files))
	left := len(files)
	deadline := time.Now().Add(timeout)
	for left > 0 && time.Now().Before(deadline) {
		for i, f := range files {
			if !seen[i].IsZero() {
				continue
			}
			if data, err := os.ReadFile(f); err == nil && string(data) == value {
				seen[i] = time.Now()
				left--
			}
		}
		time.Sleep(volumePoll)
	}
	out := seen[:0]
	for _, t := range seen {
		if !t.IsZero() {
			out = append(out, t)
		}
	}
	return out, left == 0
}

// configMapWatches reads nodelet_object_store_watches{resource="configmaps"}.
func configMapWatches(ctx context.Context, n *utils.Nodelet) (int, error) {
	text, err := n.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "nodelet_object_store_watches{") && strings.Contains(line, `resource="configmaps"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return int(v), err
		}
	}
	return 0, fmt.Errorf("no nodelet_object_store_watches for configmaps in nodelet's metrics")
}

var printMu sync.Mutex

func printConfigMaps(r cmResult, pods int) {
	printMu.Lock()
	defer printMu.Unlock()
	p99 := percentile(r.perPod, 99)
	printTable(fmt.Sprintf("ConfigMap volumes (%d pods, one shared ConfigMap + one each, node %s, %s)", pods, benchNode, machine()), []row{
		{"watches on ConfigMaps", strconv.Itoa(r.watches), fmt.Sprintf("= distinct objects referenced (%d)", r.distinct), verdict(r.watches == r.distinct)},
		{"API GETs per pod start, store warm", fmt.Sprintf("%.2f", r.getsPerWarmStart), "0", verdict(r.getsPerWarmStart == 0)},
		{"  of which object-store GETs", fmt.Sprintf("%.2f", r.storeGetsPerWarmStart), "", ""},
		{fmt.Sprintf("update → volume, per pod p50 (%d updates)", propagationRounds), fmtDur(percentile(r.perPod, 50)), "", ""},
		{"update → volume, per pod p99", fmtDur(p99), "≤ " + fmtDur(propagationP99Target), verdict(p99 <= propagationP99Target)},
		{"update → every pod's volume, p50 / max", fmtDur(percentile(r.allPods, 50)) + " / " + fmtDur(percentile(r.allPods, 100)), "", ""},
		{fmt.Sprintf("storm: updates (%d/s for %s)", stormRate, stormWindow), strconv.Itoa(r.stormUpdates), "", ""},
		{"storm: nodelet CPU", fmt.Sprintf("%s (%.2f s/s)", fmtDur(r.stormCPU), r.stormCPU.Seconds()/stormWindow.Seconds()), "", ""},
		{"storm: configmap reconciles", fmt.Sprintf("%.0f", r.stormReconciles), "", ""},
		{"storm: pod syncs per update", fmt.Sprintf("%.2f", r.stormPodSyncsPerUpdate), "", ""},
		{"storm: last value in every volume", fmt.Sprintf("%d/%d", r.stormLastEverywhere, pods), fmt.Sprintf("%d/%d", pods, pods), verdict(r.stormLastEverywhere == pods)},
		{"storm: last update → in every volume", fmtDur(r.stormConverged), "", ""},
	})
}
