package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var leaseKey = types.NamespacedName{Namespace: corev1.NamespaceNodeLease, Name: "n1"}

func TestRenewInterval(t *testing.T) {
	for secs, want := range map[int32]time.Duration{40: 10 * time.Second, 4: time.Second, 1: 250 * time.Millisecond} {
		if got := RenewInterval(secs); got != want {
			t.Errorf("RenewInterval(%d) = %v, want %v", secs, got, want)
		}
	}
}

// harness runs a Controller on a fake clock against a fake API whose writes
// can be made to fail.
type harness struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	client  client.Client
	fail    atomic.Bool
	hang    atomic.Bool
	calls   atomic.Int32
	stopped chan struct{}
}

func start(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), stopped: make(chan struct{})}
	broken := errors.New("connection refused")
	h.client = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*coordinationv1.Lease); ok {
				h.calls.Add(1)
				if h.fail.Load() {
					return broken
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			h.calls.Add(1)
			if h.fail.Load() {
				return broken
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			h.calls.Add(1)
			if h.hang.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			if h.fail.Load() {
				return broken
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	ctx, cancel := context.WithCancel(context.Background())
	c := New(Options{NodeName: "n1", DurationSeconds: 40, Client: h.client, NodeReader: h.client, Clock: h.clock,
		AttemptTimeout: 50 * time.Millisecond})
	var once sync.Once
	go func() {
		if err := c.Start(ctx); err != nil {
			t.Errorf("Start returned %v", err)
		}
		once.Do(func() { close(h.stopped) })
	}()
	t.Cleanup(func() { cancel(); <-h.stopped })
	return h
}

// settle waits until the controller sleeps on the clock again.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("controller did not wait on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) step(d time.Duration) {
	h.t.Helper()
	h.clock.Step(d)
	// Let the woken loop run its attempt and sleep again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(2 * time.Millisecond)
		if h.clock.HasWaiters() || time.Now().After(deadline) {
			return
		}
	}
}

func (h *harness) lease() *coordinationv1.Lease {
	h.t.Helper()
	l := &coordinationv1.Lease{}
	if err := h.client.Get(context.Background(), leaseKey, l); err != nil {
		h.t.Fatalf("getting lease: %v", err)
	}
	return l
}

func TestCreatesAndRenewsLease(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	h := start(t, node)
	h.settle()
	l := h.lease()
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec = %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "uid-1" || l.OwnerReferences[0].Kind != "Node" {
		t.Errorf("owner references = %+v", l.OwnerReferences)
	}
	first := l.Spec.RenewTime.Time

	h.step(10*time.Second - time.Millisecond)
	if got := h.lease().Spec.RenewTime.Time; !got.Equal(first) {
		t.Errorf("renewed before the renew interval: %v", got)
	}
	h.step(time.Millisecond)
	if got := h.lease().Spec.RenewTime.Time; !got.Equal(first.Add(10 * time.Second)) {
		t.Errorf("renewTime = %v, want %v", got, first.Add(10*time.Second))
	}
}

func TestOwnerFollowsARecreatedNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	h := start(t, node)
	h.settle()
	ctx := context.Background()
	if err := h.client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-2"}}); err != nil {
		t.Fatal(err)
	}
	h.step(10 * time.Second)
	if refs := h.lease().OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-2" {
		t.Errorf("owner references = %+v, want the new Node only", refs)
	}
}

func TestBacksOffAndRecovers(t *testing.T) {
	h := start(t)
	h.settle()
	h.fail.Store(true)
	h.step(10 * time.Second) // the renewal fails
	before := h.calls.Load()
	// Retries come after 200ms, 400ms, 800ms, ... capped at 7s.
	for _, d := range []time.Duration{200, 400, 800, 1600, 3200, 6400, 7000, 7000} {
		d *= time.Millisecond
		h.step(d - time.Millisecond)
		if got := h.calls.Load(); got != before {
			t.Fatalf("retried before the %v back-off", d)
		}
		h.step(time.Millisecond)
		if got := h.calls.Load(); got != before+1 {
			t.Fatalf("no retry after the %v back-off (calls %d, want %d)", d, got, before+1)
		}
		before++
	}
	h.fail.Store(false)
	renewedAt := h.clock.Now()
	h.step(7 * time.Second)
	if got := h.lease().Spec.RenewTime.Time; !got.Equal(renewedAt.Add(7 * time.Second)) {
		t.Errorf("renewTime = %v after recovery, want %v", got, renewedAt.Add(7*time.Second))
	}
}

func TestHungRenewalTimesOut(t *testing.T) {
	h := start(t)
	h.settle()
	first := h.lease().Spec.RenewTime.Time
	h.hang.Store(true)
	h.step(10 * time.Second) // the update hangs until the attempt timeout
	h.settle()
	h.hang.Store(false)
	h.step(200 * time.Millisecond) // the first back-off
	if got := h.lease().Spec.RenewTime.Time; !got.After(first) {
		t.Errorf("renewTime = %v, want a renewal after the hung attempt timed out", got)
	}
}
