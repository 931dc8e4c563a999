package shutdown

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/shutdown/logindtest"
)

// fakePods stands for the pod reconciler: an evicted pod stops after its
// stopAfter (never when negative).
type fakePods struct {
	mu        sync.Mutex
	pods      []*v1.Pod
	stopAfter map[types.UID]time.Duration
	evicted   map[types.UID]evicted
	stopped   map[types.UID]time.Time
}

type evicted struct {
	at time.Time
	ev planner.Eviction
}

func newFakePods(pods ...*v1.Pod) *fakePods {
	return &fakePods{pods: pods, stopAfter: map[types.UID]time.Duration{}, evicted: map[types.UID]evicted{}, stopped: map[types.UID]time.Time{}}
}

func (f *fakePods) Active() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*v1.Pod(nil), f.pods...)
}

func (f *fakePods) Evict(pod *v1.Pod, ev planner.Eviction) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.evicted[pod.UID]; ok {
		return false
	}
	f.evicted[pod.UID] = evicted{at: time.Now(), ev: ev}
	if d := f.stopAfter[pod.UID]; d >= 0 {
		time.AfterFunc(d, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.stopped[pod.UID] = time.Now()
		})
	}
	return true
}

func (f *fakePods) Running(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.stopped[uid]
	return !ok
}

func (f *fakePods) get(uid types.UID) (evicted, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evicted[uid], f.stopped[uid]
}

func testPod(name string, prio int32, grace int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: v1.PodSpec{Priority: ptr.To(prio), TerminationGracePeriodSeconds: ptr.To(grace)}}
}

// env is a private bus with a stand-in logind, and a manager on it.
type env struct {
	bus      *logindtest.Bus
	logind   *logindtest.Logind
	pods     *fakePods
	recorder *record.FakeRecorder
	mgr      *Manager
	confDir  string
	done     chan struct{}
	kicks    chan struct{}
}

func startBus(t *testing.T) (*logindtest.Bus, string) {
	t.Helper()
	// A socket path must be short: not under t.TempDir().
	dir, err := os.MkdirTemp("", "bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bus, err := logindtest.StartBus(dir)
	if err != nil {
		t.Skipf("no private D-Bus: %v", err)
	}
	t.Cleanup(bus.Stop)
	return bus, dir
}

func startLogind(t *testing.T, address string, opts logindtest.Options) *logindtest.Logind {
	t.Helper()
	l, err := logindtest.StartLogind(address, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func newEnv(t *testing.T, delayMax time.Duration, periods []Period, pods *fakePods) *env {
	t.Helper()
	e := &env{pods: pods, recorder: record.NewFakeRecorder(10), confDir: filepath.Join(t.TempDir(), "logind.conf.d"),
		done: make(chan struct{}), kicks: make(chan struct{}, 10)}
	e.bus, _ = startBus(t)
	e.logind = startLogind(t, e.bus.Address, logindtest.Options{InhibitDelayMax: delayMax, ConfDir: e.confDir})
	mgr, err := New(Options{
		NodeName: "node-a", Periods: periods, BusAddress: e.bus.Address, LogindConfDir: e.confDir,
		ActivePods: pods.Active, Running: pods.Running, Stopper: pods, Recorder: e.recorder,
		NodeChanged: func() { e.kicks <- struct{}{} },
		Log:         testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mgr = mgr
	return e
}

func (e *env) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(e.done)
		if err := e.mgr.Start(ctx); err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-e.done
	})
}

// eventually waits up to d for cond.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestManagerStopsPodsGroupByGroup(t *testing.T) {
	low, mid, critical := testPod("low", 0, 30), testPod("mid", 1000, 1), testPod("critical", 2000000000, 30)
	pods := newFakePods(low, mid, critical)
	pods.stopAfter[low.UID] = 300 * time.Millisecond
	pods.stopAfter[mid.UID] = 100 * time.Millisecond
	pods.stopAfter[critical.UID] = 200 * time.Millisecond
	e := newEnv(t, time.Minute, []Period{{0, 5}, {2000000000, 3}}, pods)
	e.start(t)

	eventually(t, 10*time.Second, "the inhibitor lock", func() bool { return len(e.logind.Held()) == 1 })
	inh := e.logind.Held()[0]
	if inh.What != "shutdown" || inh.Mode != "delay" || inh.Who != "nodelet" {
		t.Errorf("inhibitor %+v, want a delay lock on shutdown by nodelet", inh)
	}
	if e.mgr.ShuttingDown() || e.mgr.Problems() != nil {
		t.Fatal("shutting down before logind said so")
	}
	if e.logind.Reloads() != 0 {
		t.Errorf("logind reloaded %d times though its delay was long enough", e.logind.Reloads())
	}

	announced := time.Now()
	if err := e.logind.PrepareForShutdown(true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inh.Released():
	case <-time.After(15 * time.Second):
		t.Fatal("the inhibitor lock was not released")
	}
	if !e.mgr.ShuttingDown() || strings.Join(e.mgr.Problems(), ",") != "node is shutting down" {
		t.Errorf("ShuttingDown %v, Problems %q after the shutdown event", e.mgr.ShuttingDown(), e.mgr.Problems())
	}
	select {
	case <-e.kicks:
	default:
		t.Error("the node status was not asked for")
	}
	if ev := <-e.recorder.Events; ev != "Normal Shutdown Shutdown manager detected shutdown event" {
		t.Errorf("event %q", ev)
	}

	lowEv, lowStopped := pods.get(low.UID)
	midEv, midStopped := pods.get(mid.UID)
	critEv, critStopped := pods.get(critical.UID)
	for name, ev := range map[string]evicted{"low": lowEv, "mid": midEv, "critical": critEv} {
		if ev.at.IsZero() || ev.ev.Reason != ReasonTerminated || ev.ev.Message != MessageTerminated {
			t.Errorf("%s: eviction %+v", name, ev)
		}
	}
	if lowEv.ev.GracePeriodSeconds != 5 || midEv.ev.GracePeriodSeconds != 1 || critEv.ev.GracePeriodSeconds != 3 {
		t.Errorf("grace periods low %d mid %d critical %d, want 5 (the group's), 1 (the pod's), 3 (the critical group's)",
			lowEv.ev.GracePeriodSeconds, midEv.ev.GracePeriodSeconds, critEv.ev.GracePeriodSeconds)
	}
	if critEv.at.Before(lowStopped) || critEv.at.Before(midStopped) {
		t.Errorf("the critical pod was stopped at %v, before the others finished (%v, %v)", critEv.at, lowStopped, midStopped)
	}
	if rel := inh.ReleasedAt(); rel.Before(critStopped) {
		t.Errorf("the lock was released at %v, before the critical pod finished at %v", rel, critStopped)
	}
	if took := inh.ReleasedAt().Sub(announced); took > 3*time.Second {
		t.Errorf("the shutdown took %v though every pod stopped within 300ms", took)
	}

	// A cancelled shutdown: pods are admitted again, and the lock is
	// taken again for the next one.
	if err := e.logind.PrepareForShutdown(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new inhibitor lock", func() bool { return len(e.logind.Held()) == 1 })
	if e.mgr.ShuttingDown() || e.mgr.Problems() != nil {
		t.Error("still shutting down after the cancellation")
	}
	if ev := <-e.recorder.Events; ev != "Normal Shutdown Shutdown manager detected shutdown cancellation" {
		t.Errorf("event %q", ev)
	}
}

func TestManagerGroupWaitsAtMostItsPeriod(t *testing.T) {
	stuck, critical := testPod("stuck", 0, 30), testPod("critical", 2000001000, 30)
	pods := newFakePods(stuck, critical)
	pods.stopAfter[stuck.UID] = -1 // never stops
	e := newEnv(t, time.Minute, []Period{{0, 1}, {2000000000, 1}}, pods)
	e.start(t)
	eventually(t, 10*time.Second, "the inhibitor lock", func() bool { return len(e.logind.Held()) == 1 })
	inh := e.logind.Held()[0]
	announced := time.Now()
	if err := e.logind.PrepareForShutdown(true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inh.Released():
	case <-time.After(10 * time.Second):
		t.Fatal("the inhibitor lock was not released")
	}
	stuckEv, _ := pods.get(stuck.UID)
	critEv, critStopped := pods.get(critical.UID)
	if wait := critEv.at.Sub(stuckEv.at); wait < 900*time.Millisecond || wait > 2*time.Second {
		t.Errorf("the critical group started %v after the first, want its 1s period", wait)
	}
	if critStopped.IsZero() || inh.ReleasedAt().Before(critStopped) {
		t.Errorf("released at %v, critical pod stopped at %v", inh.ReleasedAt(), critStopped)
	}
	if took := inh.ReleasedAt().Sub(announced); took > 3*time.Second {
		t.Errorf("the shutdown took %v, want about the first group's 1s", took)
	}
}

func TestManagerRaisesLogindDelay(t *testing.T) {
	e := newEnv(t, 5*time.Second, []Period{{0, 120}, {2000000000, 30}}, newFakePods())
	e.start(t)
	eventually(t, 10*time.Second, "the inhibitor lock", func() bool { return len(e.logind.Held()) == 1 })
	data, err := os.ReadFile(filepath.Join(e.confDir, "99-kubelet.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "[Login]\nInhibitDelayMaxSec=150\n") {
		t.Errorf("drop-in:\n%s", data)
	}
	if e.logind.Reloads() != 1 || e.logind.InhibitDelayMax() != 150*time.Second {
		t.Errorf("reloads %d, InhibitDelayMaxUSec %v; want 1 and 2m30s", e.logind.Reloads(), e.logind.InhibitDelayMax())
	}
}

func TestManagerWithoutLongEnoughDelayDoesNothing(t *testing.T) {
	e := newEnv(t, 5*time.Second, []Period{{0, 20}, {2000000000, 10}}, newFakePods())
	// A logind that reads no drop-in: the delay stays 5s.
	e.logind.Close()
	e.logind = startLogind(t, e.bus.Address, logindtest.Options{InhibitDelayMax: 5 * time.Second})
	e.start(t)
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not give up")
	}
	if n := len(e.logind.Inhibitors()); n != 0 || e.logind.Reloads() != 1 {
		t.Errorf("%d locks taken, %d reloads; want none and 1", n, e.logind.Reloads())
	}
}

func TestManagerWithoutLogind(t *testing.T) {
	mgr, err := New(Options{NodeName: "n", Periods: []Period{{0, 10}}, BusAddress: "unix:path=" + filepath.Join(t.TempDir(), "none"),
		ActivePods: func() []*v1.Pod { return nil }, Running: func(types.UID) bool { return false }, Stopper: newFakePods(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start: %v, want nil: nodelet runs on without it", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return")
	}
	if mgr.ShuttingDown() {
		t.Error("shutting down")
	}
}

func TestManagerReconnects(t *testing.T) {
	pods := newFakePods(testPod("app", 0, 30))
	e := newEnv(t, time.Minute, []Period{{0, 5}}, pods)
	e.start(t)
	eventually(t, 10*time.Second, "the inhibitor lock", func() bool { return len(e.logind.Held()) == 1 })
	first := e.logind.Held()[0]

	// The bus goes away and comes back on the same socket.
	e.bus.Stop()
	dir := strings.TrimSuffix(strings.TrimPrefix(strings.Split(e.bus.Address, ",")[0], "unix:path="), "/bus.sock")
	if err := os.Remove(filepath.Join(dir, "bus.sock")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	bus, err := logindtest.StartBus(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	logind := startLogind(t, bus.Address, logindtest.Options{InhibitDelayMax: time.Minute})
	eventually(t, 15*time.Second, "a lock on the new bus", func() bool { return len(logind.Held()) == 1 })
	select {
	case <-first.Released():
	case <-time.After(5 * time.Second):
		t.Error("the first lock was kept after the new one was taken")
	}
	if err := logind.PrepareForShutdown(true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the pod stopped", func() bool { return !pods.Running("app") })
}
