package gc

import (
	"context"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
)

// fakeContainers is the part of cri.Runtime container GC uses.
type fakeContainers struct {
	cri.Runtime
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

func (f *fakeContainers) ListPodSandboxes(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return f.sandboxes, nil
}

func (f *fakeContainers) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return f.containers, nil
}

func (f *fakeContainers) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	return &runtimeapi.ContainerStatus{Id: id, LogPath: "/logs/" + id + ".log"}, nil
}

type collected struct{ garbage []plan.Garbage }

func (c *collected) CollectGarbage(_ context.Context, g plan.Garbage) error {
	c.garbage = append(c.garbage, g)
	return nil
}

func TestContainerGC(t *testing.T) {
	labels := func(uid, name string) map[string]string {
		return map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name}
	}
	at := func(sec int64) int64 { return t0.Add(-60e9).UnixNano() + sec*1e9 }
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	rt := &fakeContainers{
		sandboxes: []*runtimeapi.PodSandbox{
			{Id: "live-s2", Labels: labels("live", ""), State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: at(20)},
			{Id: "live-s1", Labels: labels("live", ""), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: at(10)},
			{Id: "gone-s1", Labels: labels("gone", ""), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: at(10)},
			{Id: "unlabelled", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		},
		containers: []*runtimeapi.Container{
			{Id: "l3", PodSandboxId: "live-s2", Labels: labels("live", "main"), Metadata: &runtimeapi.ContainerMetadata{Name: "main", Attempt: 2}, State: exited, CreatedAt: at(30)},
			{Id: "l2", PodSandboxId: "live-s2", Labels: labels("live", "main"), Metadata: &runtimeapi.ContainerMetadata{Name: "main", Attempt: 1}, State: exited, CreatedAt: at(25)},
			{Id: "l1", PodSandboxId: "live-s1", Labels: labels("live", "main"), Metadata: &runtimeapi.ContainerMetadata{Name: "main"}, State: exited, CreatedAt: at(15)},
			{Id: "g1", PodSandboxId: "gone-s1", Labels: labels("gone", "main"), State: exited, CreatedAt: at(15)},
			{Id: "x1", State: exited},
		},
	}
	col := &collected{}
	g := &ContainerGC{
		Runtime:   rt,
		Collector: col,
		Policy:    ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
		Clock:     clocktesting.NewFakeClock(t0),
		Log:       logr.Discard(),
		Live: func(context.Context) (map[types.UID]bool, error) {
			return map[types.UID]bool{"live": true}, nil
		},
	}
	if err := g.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	var containers, logs, sandboxes []string
	for _, gb := range col.garbage {
		for _, c := range gb.Containers {
			containers = append(containers, c.ID)
			logs = append(logs, c.LogPath)
		}
		sandboxes = append(sandboxes, gb.Sandboxes...)
	}
	// gone: everything dead; live: all but the newest dead instance and the
	// newest sandbox; nothing without a pod UID label.
	if want := []string{"g1", "l1", "l2"}; !slices.Equal(containers, want) {
		t.Errorf("removed containers %v, want %v", containers, want)
	}
	if want := []string{"/logs/g1.log", "/logs/l1.log", "/logs/l2.log"}; !slices.Equal(logs, want) {
		t.Errorf("log paths %v, want %v", logs, want)
	}
	if want := []string{"gone-s1", "live-s1"}; !slices.Equal(sandboxes, want) {
		t.Errorf("removed sandboxes %v, want %v", sandboxes, want)
	}
}
