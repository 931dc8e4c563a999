package containerlogs

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// benchPods is how many pods, of one running container each, the
// benchmarks' node runs.
const benchPods = 250

// listedRuntime lists the same containers at each call, with their log
// paths, as a runtime at rest does: what the manager does with them is
// what is measured, not the fake.
type listedRuntime struct {
	containers []*runtimeapi.Container
	logPaths   map[string]string
}

func (r *listedRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return r.containers, nil
}

func (r *listedRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	return &runtimeapi.ContainerStatus{Id: id, State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: r.logPaths[id]}, nil
}

func (r *listedRuntime) ReopenContainerLog(context.Context, string) error { return nil }

// newRestingNode returns a manager of a node running benchPods pods, each
// with a small log and its link, synced once: every later Sync finds
// nothing to rotate and no link to make or remove.
func newRestingNode(b *testing.B) (*Manager, *listedRuntime) {
	b.Helper()
	base := b.TempDir()
	logs, links := filepath.Join(base, "pods"), filepath.Join(base, "containers")
	rt := &listedRuntime{logPaths: map[string]string{}}
	for i := range benchPods {
		pod, uid := fmt.Sprintf("pod-%03d", i), fmt.Sprintf("5d0e2f4b-8b9a-4c1e-9d7a-%012d", i)
		id := fmt.Sprintf("%064d", i)
		dir := filepath.Join(logs, "ns_"+pod+"_"+uid)
		logPath := filepath.Join(dir, "app", "0.log")
		writeLog(b, logPath, 512)
		if err := MarkPodDir(dir, testNode); err != nil {
			b.Fatal(err)
		}
		rt.containers = append(rt.containers, &runtimeapi.Container{
			Id:    id,
			State: runtimeapi.ContainerState_CONTAINER_RUNNING,
			Labels: map[string]string{
				kubetypes.KubernetesPodNameLabel:       pod,
				kubetypes.KubernetesPodNamespaceLabel:  "ns",
				kubetypes.KubernetesPodUIDLabel:        uid,
				kubetypes.KubernetesContainerNameLabel: "app",
			},
		})
		rt.logPaths[id] = logPath
	}
	m, err := New(rt, Options{PodLogsDir: logs, LinksDir: links, NodeName: testNode, MaxSize: 10 << 20, MaxFiles: 5, MaxWorkers: 1,
		MonitorInterval: 10 * time.Second, Logger: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	return m, rt
}

// BenchmarkSyncAtRest250 measures one Sync of a node at rest with 250
// running containers: a size check per log, the links kept.
func BenchmarkSyncAtRest250(b *testing.B) {
	m, _ := newRestingNode(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDue250 measures the size checks alone of one Sync at rest: one
// per running container's log.
func BenchmarkDue250(b *testing.B) {
	m, rt := newRestingNode(b)
	var paths []string
	for _, c := range rt.containers {
		paths = append(paths, rt.logPaths[c.GetId()])
	}
	b.ReportAllocs()
	for b.Loop() {
		checkSizes(b, m, paths)
	}
}

// checkSizes checks the sizes of the logs at paths as Sync does.
func checkSizes(b *testing.B, m *Manager, paths []string) {
	b.Helper()
	dir, err := openLogsDir(m.opts.PodLogsDir, m.dirs)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = dir.Close() }()
	for _, p := range paths {
		if m.due(dir, p) {
			b.Fatalf("log %s is due", p)
		}
	}
}
