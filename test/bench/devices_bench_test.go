package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fakeplugin "github.com/nodelet/nodelet/test/deviceplugin"
)

// benchDevice is the extended resource of the stand-in device plugin.
const benchDevice = "example.com/bench-dev"

// BenchmarkDevicePodStart starts one pod at a time on an idle node, a
// plain pod and a pod asking for one device of a device plugin in turn,
// singleRuns times each, so that both see the same machine load: what a
// device costs a pod's start (admission's allocation, Allocate and
// PreStartContainer, the container's extra config) and its teardown.
func BenchmarkDevicePodStart(b *testing.B) {
	c := startCluster(b)
	for i := range b.N {
		ctx := b.Context()
		n, stopNodelet := c.startNodelet(b, fmt.Sprintf("devices-%d", i))
		plugin := &fakeplugin.Plugin{
			Dir: filepath.Join(n.RootDir, "device-plugins"), Resource: benchDevice, Endpoint: "bench-dev.sock",
			Devices: []string{"dev-0", "dev-1"}, PreStartRequired: true,
		}
		if err := waitFor(ctx, time.Minute, func() (bool, string, error) { err := plugin.Start(ctx); return err == nil, "", err }); err != nil {
			b.Fatalf("starting the device plugin: %v", err)
		}
		if err := waitFor(ctx, time.Minute, func() (bool, string, error) { err := c.deviceAllocatable(ctx, "2"); return err == nil, "", err }); err != nil {
			b.Fatalf("the Node's allocatable: %v; nodelet log:\n%s", err, n.LogTail(40))
		}
		ns := c.newNamespace(b, fmt.Sprintf("bench-devices-%d", i))
		w := c.watchPods(b, ns)
		var plain, device, plainGone, deviceGone []time.Duration
		for run := range singleRuns {
			t, err := c.startPod(ctx, w, sleeperPod(ns, fmt.Sprintf("plain-%02d", run)))
			if err != nil {
				b.Fatalf("plain pod, run %d: %v; nodelet log:\n%s", run, err, n.LogTail(40))
			}
			plain, plainGone = append(plain, t.ready.Sub(t.created)), append(plainGone, t.gone.Sub(t.deleted))
			t, err = c.startPod(ctx, w, devicePod(ns, fmt.Sprintf("device-%02d", run)))
			if err != nil {
				b.Fatalf("device pod, run %d: %v; nodelet log:\n%s", run, err, n.LogTail(40))
			}
			device, deviceGone = append(device, t.ready.Sub(t.created)), append(deviceGone, t.gone.Sub(t.deleted))
		}
		w.close()
		plugin.Stop()
		stopNodelet()

		p50, d50 := percentile(plain, 50), percentile(device, 50)
		g50, dg50 := percentile(plainGone, 50), percentile(deviceGone, 50)
		printTable(fmt.Sprintf("a device plugin's pod beside a plain pod (%d runs each, node %s, %s)", singleRuns, benchNode, machine()), []row{
			{"plain pod create→Ready p50", fmtDur(p50), "", ""},
			{"device pod create→Ready p50", fmtDur(d50), "", ""},
			{"device pod − plain pod, create→Ready p50", fmtDur(d50 - p50), "", ""},
			{"plain pod delete→gone p50 (grace 1s)", fmtDur(g50), "", ""},
			{"device pod delete→gone p50 (grace 1s)", fmtDur(dg50), "", ""},
			{"device pod − plain pod, delete→gone p50", fmtDur(dg50 - g50), "", ""},
		})
		b.ReportMetric(p50.Seconds()*1000, "ms-p50-plain")
		b.ReportMetric(d50.Seconds()*1000, "ms-p50-device")
	}
}

// devicePod is a sleeper pod that asks for one device of benchDevice.
func devicePod(ns, name string) *corev1.Pod {
	p := sleeperPod(ns, name)
	one := corev1.ResourceList{benchDevice: resource.MustParse("1")}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	return p
}

// deviceAllocatable reports an error until the bench node's allocatable
// holds want of benchDevice.
func (c *cluster) deviceAllocatable(ctx context.Context, want string) error {
	node, err := c.admin.CoreV1().Nodes().Get(ctx, benchNode, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got := node.Status.Allocatable[benchDevice]
	if got.Cmp(resource.MustParse(want)) != 0 {
		return fmt.Errorf("allocatable %s is %s, want %s", benchDevice, got.String(), want)
	}
	return nil
}
