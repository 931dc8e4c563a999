package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fakeplugin "github.com/nodelet/nodelet/test/deviceplugin"
	"github.com/nodelet/nodelet/test/dradriver"
	"github.com/nodelet/nodelet/test/utils"
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
		a := c.alternate(b, n, w, ns, "device", func(run int) (podTimes, error) {
			return c.startPod(ctx, w, devicePod(ns, fmt.Sprintf("device-%02d", run)))
		})
		w.close()
		plugin.Stop()
		stopNodelet()

		rows, p50, d50 := a.rows("device pod")
		printTable(fmt.Sprintf("a device plugin's pod beside a plain pod (%d runs each, node %s, %s)", singleRuns, benchNode, machine()), rows)
		b.ReportMetric(p50.Seconds()*1000, "ms-p50-plain")
		b.ReportMetric(d50.Seconds()*1000, "ms-p50-device")
	}
}

// alternated is what a plain pod and a pod of another kind, started one at
// a time in turn, took in each run.
type alternated struct{ plain, other, plainGone, otherGone []time.Duration }

// alternate starts a plain pod and then a pod of another kind (start),
// singleRuns times, so that both see the same machine load.
func (c *cluster) alternate(b *testing.B, n *utils.Nodelet, w *podWatch, ns, kind string, start func(run int) (podTimes, error)) alternated {
	b.Helper()
	var a alternated
	for run := range singleRuns {
		t, err := c.startPod(b.Context(), w, sleeperPod(ns, fmt.Sprintf("plain-%02d", run)))
		if err != nil {
			b.Fatalf("plain pod, run %d: %v; nodelet log:\n%s", run, err, n.LogTail(40))
		}
		a.plain, a.plainGone = append(a.plain, t.ready.Sub(t.created)), append(a.plainGone, t.gone.Sub(t.deleted))
		if t, err = start(run); err != nil {
			b.Fatalf("%s pod, run %d: %v; nodelet log:\n%s", kind, run, err, n.LogTail(40))
		}
		a.other, a.otherGone = append(a.other, t.ready.Sub(t.created)), append(a.otherGone, t.gone.Sub(t.deleted))
	}
	return a
}

// rows are the table rows of an alternation: each kind's create→Ready and
// delete→gone p50 and their differences; p50 and o50 are the plain and the
// other pods' create→Ready p50.
func (a alternated) rows(other string) (rows []row, p50, o50 time.Duration) {
	p50, o50 = percentile(a.plain, 50), percentile(a.other, 50)
	g50, og50 := percentile(a.plainGone, 50), percentile(a.otherGone, 50)
	return []row{
		{"plain pod create→Ready p50", fmtDur(p50), "", ""},
		{other + " create→Ready p50", fmtDur(o50), "", ""},
		{other + " − plain pod, create→Ready p50", fmtDur(o50 - p50), "", ""},
		{"plain pod delete→gone p50 (grace 1s)", fmtDur(g50), "", ""},
		{other + " delete→gone p50 (grace 1s)", fmtDur(og50), "", ""},
		{other + " − plain pod, delete→gone p50", fmtDur(og50 - g50), "", ""},
	}, p50, o50
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

// benchDRADriver is the stand-in DRA driver's name, and its DeviceClass's.
const benchDRADriver = "dra.bench.nodelet.test"

// BenchmarkDRAPodStart starts one pod at a time on an idle node, a plain
// pod and a pod with a ResourceClaim of the stand-in DRA driver in turn,
// singleRuns times each. The claim is made with its pod and allocated and
// reserved for it as the scheduler would, right after the pod's create,
// so the DRA pod's time includes that write; the node's part is reading
// the claim, NodePrepareResources over a local socket, the checkpoint and
// the CDI device, and NodeUnprepareResources at the teardown.
func BenchmarkDRAPodStart(b *testing.B) {
	if !utils.IsContainerd2() {
		b.Skip("DRA needs a runtime that applies CDI devices (containerd 2)")
	}
	c := startCluster(b)
	cl, err := c.api.AdminClient()
	if err != nil {
		b.Fatalf("admin client: %v", err)
	}
	ctx := b.Context()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: benchDRADriver}}
	if err := client.IgnoreAlreadyExists(cl.Create(ctx, class)); err != nil {
		b.Fatalf("creating the DeviceClass: %v", err)
	}
	for i := range b.N {
		n, stopNodelet := c.startNodelet(b, fmt.Sprintf("dra-%d", i))
		driver := &dradriver.Driver{
			Name:        benchDRADriver,
			RegistryDir: filepath.Join(n.RootDir, "plugins_registry"),
			PluginDir:   filepath.Join(n.RootDir, "plugins", benchDRADriver),
			CDIDir:      c.ctrd.CDISpecDir(),
			Reader:      cl,
		}
		if err := driver.Start(); err != nil {
			b.Fatalf("starting the DRA driver: %v", err)
		}
		if err := waitFor(ctx, time.Minute, func() (bool, string, error) {
			ok, msgs := driver.Registrations()
			return slices.Contains(ok, true), fmt.Sprint(msgs), nil
		}); err != nil {
			b.Fatalf("the driver's registration: %v; nodelet log:\n%s", err, n.LogTail(40))
		}
		ns := c.newNamespace(b, fmt.Sprintf("bench-dra-%d", i))
		w := c.watchPods(b, ns)
		a := c.alternate(b, n, w, ns, "DRA", func(run int) (podTimes, error) {
			return c.startClaimPod(ctx, cl, w, ns, fmt.Sprintf("dra-%02d", run))
		})
		w.close()
		prepared, unprepared := len(driver.Prepared()), len(driver.Unprepared())
		driver.Stop()
		stopNodelet()

		rows, p50, d50 := a.rows("DRA pod")
		rows = append(rows, row{"NodePrepareResources / NodeUnprepareResources calls", fmt.Sprintf("%d / %d", prepared, unprepared), fmt.Sprintf("%d / %d", singleRuns, singleRuns), verdict(prepared == singleRuns && unprepared == singleRuns)})
		printTable(fmt.Sprintf("a DRA pod beside a plain pod (%d runs each, node %s, %s; the DRA pod's create→Ready includes the test's allocation write)", singleRuns, benchNode, machine()), rows)
		b.ReportMetric(p50.Seconds()*1000, "ms-p50-plain")
		b.ReportMetric(d50.Seconds()*1000, "ms-p50-dra")
	}
}

// startClaimPod is startPod for a pod with a ResourceClaim of the stand-in
// DRA driver: the claim is created first, and once the pod exists it is
// allocated the driver's device and reserved for the pod, as the scheduler
// would. The claim is deleted after the pod is gone.
func (c *cluster) startClaimPod(ctx context.Context, cl client.Client, w *podWatch, ns, name string) (podTimes, error) {
	var t podTimes
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "dev", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: benchDRADriver},
		}}}},
	}
	if err := cl.Create(ctx, claim); err != nil {
		return t, fmt.Errorf("creating claim %s: %w", name, err)
	}
	pod := sleeperPod(ns, name)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To(name)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "dev"}}
	t.created = time.Now()
	created, err := c.admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return t, fmt.Errorf("creating pod %s: %w", name, err)
	}
	claim.Status = resourceapi.ResourceClaimStatus{
		Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "dev", Driver: benchDRADriver, Pool: benchNode, Device: "dev-0"}},
		}},
		ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: created.Name, UID: created.UID}},
	}
	if err := cl.Status().Update(ctx, claim); err != nil {
		return t, fmt.Errorf("allocating claim %s: %w", name, err)
	}
	var missing int
	if t.ready, missing = w.waitAll([]string{name}, w.readyAt, podsTimeout); missing > 0 {
		return t, fmt.Errorf("pod %s not Ready after %s", name, podsTimeout)
	}
	t.deleted = time.Now()
	if err := c.deletePod(ctx, ns, name); err != nil {
		return t, err
	}
	if t.gone, missing = w.waitAll([]string{name}, w.goneAt, podsTimeout); missing > 0 {
		return t, fmt.Errorf("pod %s still in the API %s after deletion", name, podsTimeout)
	}
	if err := cl.Delete(ctx, claim); err != nil {
		return t, fmt.Errorf("deleting claim %s: %w", name, err)
	}
	return t, nil
}
