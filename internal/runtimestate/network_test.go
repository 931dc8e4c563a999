package runtimestate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/nodeinfo"
)

func condition(typ string, ok bool, reason, message string) *runtimeapi.RuntimeCondition {
	return &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: reason, Message: message}
}

func status(conds ...*runtimeapi.RuntimeCondition) *runtimeapi.RuntimeStatus {
	return &runtimeapi.RuntimeStatus{Conditions: conds}
}

// cniNotReady is containerd's NetworkReady condition before it has a CNI
// configuration.
var cniNotReady = condition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady",
	"Network plugin returns error: cni plugin not initialized")

func TestNetworkError(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   *runtimeapi.RuntimeStatus
		want string // "" for nil
	}{
		{name: "status not known", st: nil},
		{name: "network ready", st: status(condition(runtimeapi.RuntimeReady, true, "", ""), condition(runtimeapi.NetworkReady, true, "", ""))},
		{
			name: "network not ready, in the kubelet's words",
			st:   status(condition(runtimeapi.RuntimeReady, true, "", ""), cniNotReady),
			want: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
		},
		{
			name: "runtime not ready says nothing of the network",
			st:   status(condition(runtimeapi.RuntimeReady, false, "Down", "x"), condition(runtimeapi.NetworkReady, true, "", "")),
		},
		{
			name: "network condition missing",
			st:   status(condition(runtimeapi.RuntimeReady, true, "", "")),
			want: "container runtime network not ready: NetworkReady condition is missing",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NetworkError(tc.st)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("NetworkError() = %v, want nil", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("NetworkError() = %v, want %q", err, tc.want)
			}
		})
	}
}

// fakeStatus answers Status with its fields and counts the calls.
type fakeStatus struct {
	st    *runtimeapi.RuntimeStatus
	err   error
	calls int
}

func (f *fakeStatus) Status(ctx context.Context) (*runtimeapi.RuntimeStatus, error) {
	f.calls++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return f.st, f.err
}

func TestNetworkReadsAtMostOncePerMaxAge(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rt := &fakeStatus{st: status(cniNotReady)}
	n := NewNetwork(rt, NetworkOptions{MaxAge: time.Second, Clock: clk})
	ctx := context.Background()

	for range 3 {
		if err := n.Err(ctx); err == nil {
			t.Fatal("Err() = nil while the network is not ready")
		}
	}
	if rt.calls != 1 {
		t.Fatalf("Status called %d times for three asks within MaxAge, want 1", rt.calls)
	}

	// Ready now: seen once MaxAge has passed, not before.
	rt.st = status(condition(runtimeapi.NetworkReady, true, "", ""))
	clk.SetTime(clk.Now().Add(999 * time.Millisecond))
	if err := n.Err(ctx); err == nil {
		t.Fatal("Err() = nil before MaxAge passed: the status was read again")
	}
	clk.SetTime(clk.Now().Add(time.Millisecond))
	if err := n.Err(ctx); err != nil {
		t.Fatalf("Err() = %v once MaxAge passed and the network is ready", err)
	}
	if rt.calls != 2 {
		t.Fatalf("Status called %d times, want 2", rt.calls)
	}
}

func TestNetworkKeepsTheLastStatusWhenAReadFails(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rt := &fakeStatus{err: errors.New("connection refused")}
	n := NewNetwork(rt, NetworkOptions{MaxAge: time.Second, Clock: clk})
	ctx := context.Background()

	if err := n.Err(ctx); err != nil {
		t.Fatalf("Err() = %v with no status known, want nil (nothing held)", err)
	}
	if err := n.Err(ctx); err != nil || rt.calls != 1 {
		t.Fatalf("Err() = %v after %d calls, want nil after one: a failed read is not tried again within MaxAge", err, rt.calls)
	}

	rt.st, rt.err = status(cniNotReady), nil
	clk.SetTime(clk.Now().Add(time.Second))
	if err := n.Err(ctx); err == nil {
		t.Fatal("Err() = nil after reading a not-ready network")
	}

	rt.err = errors.New("deadline exceeded")
	clk.SetTime(clk.Now().Add(time.Second))
	if err := n.Err(ctx); err == nil {
		t.Fatal("a failed read forgot that the network was not ready")
	}
}

func TestNetworkReadCutShortByTheCallerIsTriedAgain(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rt := &fakeStatus{st: status(cniNotReady)}
	n := NewNetwork(rt, NetworkOptions{MaxAge: time.Second, Clock: clk})

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Err(cancelled); err != nil {
		t.Fatalf("Err() = %v with no status known, want nil", err)
	}
	if err := n.Err(context.Background()); err == nil {
		t.Fatal("the next caller did not read the status again after a cancelled read")
	}
	if rt.calls != 2 {
		t.Fatalf("Status called %d times, want 2", rt.calls)
	}
}

// TestNetworkErrorIsTheNodeConditionsWording: the Event a held pod gets
// and the Node's Ready condition say the same of the network.
func TestNetworkErrorIsTheNodeConditionsWording(t *testing.T) {
	for _, st := range []*runtimeapi.RuntimeStatus{
		status(condition(runtimeapi.RuntimeReady, true, "", ""), cniNotReady),
		status(condition(runtimeapi.RuntimeReady, true, "", "")),
	} {
		err := NetworkError(st)
		if err == nil {
			t.Fatalf("NetworkError(%v) = nil", st)
		}
		if problems := nodeinfo.RuntimeProblems(st, nil); !slices.Contains(problems, err.Error()) {
			t.Fatalf("node status problems %q do not contain %q", problems, err)
		}
	}
}
