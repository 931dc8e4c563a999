package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/csi/hostpath"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// csiRuns is how many pods of each kind BenchmarkCSIVolumes starts,
	// one at a time.
	csiRuns = 10
	// csiClass is the StorageClass of the benchmark's claims.
	csiClass = "bench-csi"
	// csiSettle bounds the wait, after a CSI pod is gone, for the driver
	// calls of its teardown (the unpublish and unstage nodelet may make
	// after the pod left the API).
	csiSettle = 30 * time.Second
)

// csiKind is one kind of pod BenchmarkCSIVolumes starts.
type csiKind int

const (
	kindEmptyDir csiKind = iota
	kindClaim
	kindInline
	csiKinds
)

func (k csiKind) String() string {
	return [...]string{"emptyDir", "CSI PVC (bound)", "CSI inline"}[k]
}

// csiMethods are the node service calls counted per pod lifecycle, with
// the minimum the CSI spec requires of one pod's lifecycle on a driver
// with STAGE_UNSTAGE_VOLUME (-1: not required, but counted).
var csiMethods = []struct {
	name   string
	claim  int // a persistent volume: staged, then published
	inline int // an ephemeral inline volume: published only
}{
	{"NodeGetCapabilities", -1, -1},
	{"NodeStageVolume", 1, 0},
	{"NodePublishVolume", 1, 1},
	{"NodeUnpublishVolume", 1, 1},
	{"NodeUnstageVolume", 1, 0},
	{"NodeGetVolumeStats", -1, -1},
}

// csiResult is what one kind measured.
type csiResult struct {
	ready, gone []time.Duration
	// calls counts the driver's calls per method in the windows of this
	// kind's pods (from before the create to the end of the teardown).
	calls map[string]int
	// failed counts the calls that did not answer OK.
	failed map[string]int
	// at holds, per method, when its first call of each pod came: from
	// the pod's create, or for the teardown calls (NodeUn*,
	// ControllerUn*) from its delete.
	at map[string][]time.Duration
}

// BenchmarkCSIVolumes runs, on one nodelet with the test CSI driver
// registered (attachRequired, with external-attacher and the
// attach/detach controller), one pod at a time: a pod with an emptyDir, the
// same pod with a claim on the CSI StorageClass bound before the pod is
// created (provisioning is not measured), and the same pod with a CSI
// inline volume, csiRuns of each, interleaved so that each kind sees the
// same machine. It measures create→Ready and delete→gone, and counts the
// driver's calls per pod lifecycle from its call log.
func BenchmarkCSIVolumes(b *testing.B) {
	c := startCluster(b)
	ctx := b.Context()
	kcm, err := utils.StartControllerManager(ctx, c.api, utils.ControllerManagerOptions{})
	if err != nil {
		b.Fatalf("starting kube-controller-manager: %v", err)
	}
	b.Cleanup(func() {
		if err := kcm.Stop(); err != nil {
			b.Errorf("stopping kube-controller-manager: %v", err)
		}
	})
	for i := range b.N {
		n, stopNodelet := c.startNodelet(b, fmt.Sprintf("csi-%d", i))
		stack, err := utils.StartCSIStack(ctx, c.api, utils.CSIStackOptions{
			NodeID:          benchNode,
			RegistrationDir: filepath.Join(n.RootDir, "plugins_registry"),
			PluginDir:       filepath.Join(n.RootDir, "plugins", hostpath.DefaultDriverName),
			StorageClass:    csiClass,
			AttachRequired:  true,
		})
		if err != nil {
			b.Fatalf("starting the CSI stack: %v", err)
		}
		ns := c.newNamespace(b, fmt.Sprintf("bench-csi-%d", i))
		claims := c.bindClaims(b, ns, stack, n)
		w := c.watchPods(b, ns)

		res := make([]csiResult, csiKinds)
		for k := range res {
			res[k].calls, res[k].failed = map[string]int{}, map[string]int{}
			res[k].at = map[string][]time.Duration{}
		}
		var claimPods []claimPod
		claimHandles := map[string]bool{}
		for run := range csiRuns {
			for k := range csiKinds {
				name := fmt.Sprintf("%s-%02d", [...]string{"empty", "claim", "inline"}[k], run)
				pod := csiPod(ns, name, k, claims[run])
				before := len(stack.Calls(""))
				t, err := c.startPod(ctx, w, pod)
				if err != nil {
					b.Fatalf("%s run %d: %v; nodelet log:\n%s\n%s", k, run, err, n.LogTail(60), stack.LogTail(20))
				}
				if err := settleCalls(ctx, stack, before, k); err != nil {
					b.Fatalf("%s run %d: %v; nodelet log:\n%s", k, run, err, n.LogTail(60))
				}
				if k == kindClaim {
					handle, err := c.claimHandle(ctx, ns, claims[run])
					if err != nil {
						b.Fatal(err)
					}
					claimPods = append(claimPods, claimPod{handle: handle, times: t})
					claimHandles[handle] = true
				}
				res[k].ready = append(res[k].ready, t.ready.Sub(t.created))
				res[k].gone = append(res[k].gone, t.gone.Sub(t.deleted))
				seen := map[string]bool{}
				for _, call := range stack.Calls("")[before:] {
					if k != kindClaim && claimHandles[call.VolumeID] {
						// A claim's late call (its detach) in a later
						// pod's window: it counts for its own pod.
						continue
					}
					res[k].calls[call.Method]++
					if call.Code != "OK" {
						res[k].failed[call.Method]++
					}
					// The first call of each method, from the pod's
					// create or delete; a claim's by its handle below.
					if k == kindClaim || seen[call.Method] {
						continue
					}
					seen[call.Method] = true
					from := t.created
					if strings.HasPrefix(call.Method, "NodeUn") || strings.HasPrefix(call.Method, "ControllerUn") {
						from = t.deleted
					}
					res[k].at[call.Method] = append(res[k].at[call.Method], call.Time.Sub(from))
				}
			}
		}
		w.close()
		// The calls that name a volume count for its own claim's pod;
		// NodeGetCapabilities, which names none, by window.
		for m, n := range claimTimes(ctx, stack, claimPods, res[kindClaim].at) {
			res[kindClaim].calls[m] = n
		}
		printCSI(res)
		b.ReportMetric((percentile(res[kindClaim].ready, 50)-percentile(res[kindEmptyDir].ready, 50)).Seconds()*1000, "ms-csi-over-emptydir-ready")
		b.ReportMetric((percentile(res[kindClaim].gone, 50)-percentile(res[kindEmptyDir].gone, 50)).Seconds()*1000, "ms-csi-over-emptydir-gone")
		b.ReportMetric(float64(res[kindClaim].calls["NodeGetCapabilities"])/csiRuns, "caps-calls/pvc-pod")

		if err := stack.Stop(); err != nil {
			b.Errorf("stopping the CSI stack: %v", err)
		}
		stopNodelet()
	}
}

// bindClaims waits for the driver's registration (its CSINode entry, which
// the provisioner needs for the volumes' topology), then creates csiRuns
// claims on the CSI StorageClass and waits until all are bound.
func (c *cluster) bindClaims(b *testing.B, ns string, stack *utils.CSIStack, n *utils.Nodelet) []string {
	b.Helper()
	ctx := b.Context()
	deadline := time.Now().Add(podsTimeout)
	for {
		cn, err := c.admin.StorageV1().CSINodes().Get(ctx, benchNode, metav1.GetOptions{})
		if err == nil && slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == stack.DriverName() }) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("driver %s not registered on %s (last error %v); nodelet log:\n%s", stack.DriverName(), benchNode, err, n.LogTail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	names := make([]string, csiRuns)
	for i := range names {
		names[i] = fmt.Sprintf("data-%02d", i)
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i]},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(csiClass),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}},
			},
		}
		if _, err := c.admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			b.Fatalf("creating claim %s: %v", names[i], err)
		}
	}
	for _, name := range names {
		for {
			pvc, err := c.admin.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && pvc.Status.Phase == corev1.ClaimBound {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("claim %s not bound (last error %v); CSI stack log:\n%s", name, err, stack.LogTail(20))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return names
}

// csiPod is the benchmark's sleeper pod with one volume of kind k mounted
// at /data.
func csiPod(ns, name string, k csiKind, claim string) *corev1.Pod {
	p := sleeperPod(ns, name)
	var src corev1.VolumeSource
	switch k {
	case kindEmptyDir:
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	case kindClaim:
		src.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}
	case kindInline:
		src.CSI = &corev1.CSIVolumeSource{Driver: hostpath.DefaultDriverName}
	}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: src}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

// claimPod is a pod with a claim: its volume's handle and its times.
type claimPod struct {
	handle string
	times  podTimes
}

// claimHandle is the volume handle of the claim's PV.
func (c *cluster) claimHandle(ctx context.Context, ns, claim string) (string, error) {
	pvc, err := c.admin.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("getting claim %s: %w", claim, err)
	}
	pv, err := c.admin.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("getting volume %s: %w", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.CSI == nil {
		return "", fmt.Errorf("volume %s is not a CSI volume", pv.Name)
	}
	return pv.Spec.CSI.VolumeHandle, nil
}

// claimTimes waits (up to csiSettle) for the detach of the last claim's
// volume, then adds to at, per method, when the first call for each
// claim's volume came: from its pod's create, or for the teardown calls
// from its delete, and returns the count of the calls that name the
// claims' volumes, per method. The detach of a volume comes whenever the
// attach/detach controller gets to it, possibly in a later pod's window or
// after the last, so the calls are matched by volume handle.
func claimTimes(ctx context.Context, stack *utils.CSIStack, pods []claimPod, at map[string][]time.Duration) map[string]int {
	if len(pods) == 0 {
		return nil
	}
	last := pods[len(pods)-1].handle
	deadline := time.Now().Add(csiSettle)
	for time.Now().Before(deadline) && ctx.Err() == nil &&
		!slices.ContainsFunc(stack.Calls("ControllerUnpublishVolume"), func(r utils.CallRecord) bool { return r.VolumeID == last }) {
		time.Sleep(100 * time.Millisecond)
	}
	calls := stack.Calls("")
	counts := map[string]int{}
	for _, p := range pods {
		seen := map[string]bool{}
		for _, call := range calls {
			if call.VolumeID != p.handle || call.Time.Before(p.times.created) {
				continue
			}
			counts[call.Method]++
			if seen[call.Method] {
				continue
			}
			seen[call.Method] = true
			from := p.times.created
			if strings.Contains(call.Method, "Un") {
				from = p.times.deleted
			}
			at[call.Method] = append(at[call.Method], call.Time.Sub(from))
		}
	}
	return counts
}

// podTimes are when a pod was created, seen Ready, deleted and seen gone.
type podTimes struct{ created, ready, deleted, gone time.Time }

// startPod creates pod and waits until the watch sees it Ready, then
// deletes it and waits until the watch sees it gone.
func (c *cluster) startPod(ctx context.Context, w *podWatch, pod *corev1.Pod) (podTimes, error) {
	var t podTimes
	t.created = time.Now()
	if _, err := c.admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return t, fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	var missing int
	if t.ready, missing = w.waitAll([]string{pod.Name}, w.readyAt, podsTimeout); missing > 0 {
		return t, fmt.Errorf("pod %s not Ready after %s", pod.Name, podsTimeout)
	}
	t.deleted = time.Now()
	if err := c.deletePod(ctx, pod.Namespace, pod.Name); err != nil {
		return t, err
	}
	if t.gone, missing = w.waitAll([]string{pod.Name}, w.goneAt, podsTimeout); missing > 0 {
		return t, fmt.Errorf("pod %s still in the API %s after deletion", pod.Name, podsTimeout)
	}
	return t, nil
}

// settleCalls waits until the call log, from index before on, holds the
// teardown of the pod's volume: a NodeUnstageVolume for a claim, a
// NodeUnpublishVolume for an inline volume; nothing for an emptyDir.
func settleCalls(ctx context.Context, stack *utils.CSIStack, before int, k csiKind) error {
	last := map[csiKind]string{kindClaim: "NodeUnstageVolume", kindInline: "NodeUnpublishVolume"}[k]
	if last == "" {
		return nil
	}
	deadline := time.Now().Add(csiSettle)
	for {
		if slices.ContainsFunc(stack.Calls("")[before:], func(r utils.CallRecord) bool { return r.Method == last && r.Code == "OK" }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s in the driver's call log %s after the pod was gone", last, csiSettle)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func printCSI(res []csiResult) {
	title := fmt.Sprintf("pod with a CSI volume (%d pods of each kind, one at a time, node %s, %s)", csiRuns, benchNode, machine())
	var rows []row
	for k := range csiKinds {
		r := res[k]
		rows = append(rows,
			row{fmt.Sprintf("%s: create→Ready p50 / p90", k), fmtDur(percentile(r.ready, 50)) + " / " + fmtDur(percentile(r.ready, 90)), "", ""},
			row{fmt.Sprintf("%s: delete→gone p50 / p90 (grace 1s)", k), fmtDur(percentile(r.gone, 50)) + " / " + fmtDur(percentile(r.gone, 90)), "", ""},
		)
	}
	e := res[kindEmptyDir]
	for _, k := range []csiKind{kindClaim, kindInline} {
		r := res[k]
		rows = append(rows,
			row{fmt.Sprintf("%s − emptyDir: create→Ready p50 / p90", k),
				fmtDur(percentile(r.ready, 50)-percentile(e.ready, 50)) + " / " + fmtDur(percentile(r.ready, 90)-percentile(e.ready, 90)), "", ""},
			row{fmt.Sprintf("%s − emptyDir: delete→gone p50 / p90", k),
				fmtDur(percentile(r.gone, 50)-percentile(e.gone, 50)) + " / " + fmtDur(percentile(r.gone, 90)-percentile(e.gone, 90)), "", ""},
		)
	}
	for _, k := range []csiKind{kindClaim, kindInline} {
		for _, m := range []string{"ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume"} {
			if ds := res[k].at[m]; len(ds) > 0 {
				from := "create"
				if strings.Contains(m, "Un") {
					from = "delete"
				}
				rows = append(rows, row{fmt.Sprintf("%s: %s→%s p50 / p90 (%d pods)", k, from, m, len(ds)),
					fmtDur(percentile(ds, 50)) + " / " + fmtDur(percentile(ds, 90)), "", ""})
			}
		}
	}
	printTable(title, rows)

	// The second table: the driver's calls per pod lifecycle.
	fmt.Println("CSI calls per pod lifecycle (driver's call log ÷ pods; min: what the CSI spec requires of a driver with STAGE_UNSTAGE_VOLUME)")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "method\tCSI PVC\tmin\tCSI inline\tmin\temptyDir\t")
	perPod := func(k csiKind, m string) string {
		out := fmt.Sprintf("%.2f", float64(res[k].calls[m])/csiRuns)
		if f := res[k].failed[m]; f > 0 {
			out += fmt.Sprintf(" (%d not OK)", f)
		}
		return out
	}
	minimum := func(v int) string {
		if v < 0 {
			return "0"
		}
		return fmt.Sprint(v)
	}
	known := map[string]bool{}
	for _, m := range csiMethods {
		known[m.name] = true
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", m.name, perPod(kindClaim, m.name), minimum(m.claim), perPod(kindInline, m.name), minimum(m.inline), perPod(kindEmptyDir, m.name))
	}
	var other []string
	for k := range csiKinds {
		for m := range res[k].calls {
			if !known[m] && !slices.Contains(other, m) {
				other = append(other, m)
			}
		}
	}
	slices.Sort(other)
	for _, m := range other {
		fmt.Fprintf(tw, "%s\t%s\t\t%s\t\t%s\t\n", m, perPod(kindClaim, m), perPod(kindInline, m), perPod(kindEmptyDir, m))
	}
	_ = tw.Flush()
	fmt.Println()
}
