package executor

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// recordingLogs records the links made and the containers forgotten; link
// fails when linkErr is set.
type recordingLogs struct {
	mu      sync.Mutex
	linkErr error
	links   []string // pod/namespace/container/id → logPath
	forgot  []string // id logPath
}

func (r *recordingLogs) Link(pod, namespace, container, id, logPath string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.links = append(r.links, pod+"/"+namespace+"/"+container+"/"+id+" → "+logPath)
	return r.linkErr
}

func (r *recordingLogs) Forget(id, logPath string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgot = append(r.forgot, id+" "+logPath)
	return nil
}

func TestContainersAreLinkedWhenCreatedAndForgottenWhenRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	logs := &recordingLogs{linkErr: errors.New("read-only file system")}
	e.Logs = logs
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)
	id := idOf(rt, "app")
	g.Expect(byName(rt)).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning}), "a link that cannot be made fails nothing")
	dir := filepath.Join(e.Sandbox.PodLogsDir, "ns_web_uid-1")
	g.Expect(logs.links).To(Equal([]string{"web/ns/app/" + id + " → " + filepath.Join(dir, "app", "0.log")}))

	g.Expect(rs.StopContainer(ctx, id, 0)).To(Succeed())
	dead := *rt.Latest("app")
	dead.LogPath = "/logs/0.log"
	g.Expect(e.CollectGarbage(ctx, plan.Garbage{Containers: []state.Container{dead}})).To(Succeed())
	g.Expect(logs.forgot).To(Equal([]string{id + " /logs/0.log"}), "a collected container's link and rotated files")

	logs.forgot = nil
	rt = runPod(t, ctx, e, pod, &st)
	id = idOf(rt, "app")
	g.Expect(e.RemovePod(ctx, pod, rt)).To(Succeed())
	g.Expect(logs.forgot).To(Equal([]string{id + " "}), "a removed pod's containers' links; their files go with the pod's log directory")
}
