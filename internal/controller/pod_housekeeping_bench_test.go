package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/containerlogs"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podworkers"
)

// benchPods is how many pods the housekeeping benchmarks' node runs.
const benchPods = 250

// listedRuntime lists the same sandboxes and containers at each call.
type listedRuntime struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

func (r *listedRuntime) ListPodSandboxes(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return r.sandboxes, nil
}

func (r *listedRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return r.containers, nil
}

// listedPods lists the same pods at each call, as the cache does.
type listedPods struct {
	pods []*corev1.Pod
}

func (r *listedPods) ListPods(context.Context) ([]*corev1.Pod, error) {
	return r.pods, nil
}

// newRestingHousekeeper returns the housekeeper of a node at rest that
// runs benchPods pods, each with a sandbox, a container, a pod
// directory, a checkpoint, a marked log directory and a worker.
func newRestingHousekeeper(b *testing.B) *housekeeper {
	b.Helper()
	const node = "node-a"
	store, err := checkpoint.NewFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	logsDir := b.TempDir()
	rt := &listedRuntime{}
	dirs := &fakeDirs{}
	memory := &fakeMemory{held: map[types.UID]bool{}, noted: map[types.UID]bool{}}
	workers := &fakeWorkers{}
	pods := &listedPods{}
	for i := range benchPods {
		name, uid := fmt.Sprintf("pod-%03d", i), types.UID(fmt.Sprintf("5d0e2f4b-8b9a-4c1e-9d7a-%012d", i))
		labels := map[string]string{
			kubetypes.KubernetesPodNamespaceLabel: "ns",
			kubetypes.KubernetesPodNameLabel:      name,
			kubetypes.KubernetesPodUIDLabel:       string(uid),
		}
		rt.sandboxes = append(rt.sandboxes, &runtimeapi.PodSandbox{Id: fmt.Sprintf("sb-%03d", i), Labels: labels})
		rt.containers = append(rt.containers, &runtimeapi.Container{Id: fmt.Sprintf("c-%03d", i), Labels: labels})
		if err := store.CreateCheckpoint(checkpointKey(uid), checkpoint.NewData(state.NewPodState(uid))); err != nil {
			b.Fatal(err)
		}
		dir := filepath.Join(logsDir, "ns_"+name+"_"+string(uid))
		if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := containerlogs.MarkPodDir(dir, node); err != nil {
			b.Fatal(err)
		}
		dirs.dirs = append(dirs.dirs, uid)
		memory.held[uid], memory.noted[uid] = true, true
		workers.keys = append(workers.keys, podworkers.Key{Namespace: "ns", Name: name, UID: uid})
		pods.pods = append(pods.pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}})
	}
	return &housekeeper{
		pods:    pods,
		runtime: rt,
		dirs:    dirs,
		store:   store,
		logsDir: logsDir,
		node:    node,
		workers: workers,
		memory:  memory,
	}
}

// BenchmarkHousekeepingSweepAtRest250 measures one sweep of a node at
// rest with 250 pods: everything read, nothing to remove.
func BenchmarkHousekeepingSweepAtRest250(b *testing.B) {
	h := newRestingHousekeeper(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := h.sweep(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHousekeepingReadAtRest250 measures what a sweep reads of a
// node at rest with 250 pods before it lists the API server's pods.
func BenchmarkHousekeepingReadAtRest250(b *testing.B) {
	h := newRestingHousekeeper(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
