package pleg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// benchPods is the pod count of the relist benchmarks: a full node.
const benchPods = 250

// BenchmarkRelist relists a node of benchPods running pods, each of one
// sandbox and one container, with nothing changed since the last relist and
// with one pod's container changing state at every relist; over a lister
// that hands out its unchanged objects again, as cri's brief lister does,
// and over cri's client of the fake runtime, which lists new objects every
// time.
func BenchmarkRelist(b *testing.B) {
	for _, changing := range []bool{false, true} {
		name := "unchanged"
		if changing {
			name = "one-pod-changing"
		}
		b.Run("shared-objects/"+name, func(b *testing.B) {
			l := &listsOf{}
			for i := range benchPods {
				uid, sb, c := benchIDs(i)
				l.sandboxes = append(l.sandboxes, sandbox(sb, uid, ready))
				l.containers = append(l.containers, container(c, sb, uid, running))
			}
			r, err := New(l, Options{})
			if err != nil {
				b.Fatal(err)
			}
			states := [2]*runtimeapi.Container{l.containers[0], exitedCopy(l.containers[0])}
			benchRelists(b, r, changing, func(i int) { l.containers[0] = states[i%2] })
		})
		b.Run("fake-runtime/"+name, func(b *testing.B) {
			e := newEnv(b, Options{})
			var first string
			for i := range benchPods {
				uid, _, _ := benchIDs(i)
				_, id := e.runPod(b, uid)
				if i == 0 {
					first = id
				}
			}
			states := [2]runtimeapi.ContainerState{running, exited}
			benchRelists(b, e.r, changing, func(i int) {
				e.fake.Lock()
				e.fake.Containers[first].State = states[i%2]
				e.fake.Unlock()
			})
		})
	}
}

// benchIDs returns the pod UID, sandbox ID and container ID of the i-th
// pod of a benchmark, random-looking as a runtime's: IDs that share a long
// prefix would make sorting them look dearer than it is.
func benchIDs(i int) (uid, sandboxID, containerID string) {
	id := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	return id(fmt.Sprint("pod", i))[:36], id(fmt.Sprint("sandbox", i)), id(fmt.Sprint("container", i))
}

// exitedCopy returns a copy of c that has exited.
func exitedCopy(c *runtimeapi.Container) *runtimeapi.Container {
	return container(c.GetId(), c.GetPodSandboxId(), c.GetLabels()[kubetypes.KubernetesPodUIDLabel], exited)
}

// benchRelists relists r once per iteration, calling change before each
// when changing, and checks that each relist reports one pod then, none
// otherwise.
func benchRelists(b *testing.B, r *Relister, changing bool, change func(i int)) {
	b.Helper()
	ctx := context.Background()
	if err := r.Relist(ctx); err != nil {
		b.Fatal(err)
	}
	drain(r.Events())
	want := 0
	if changing {
		want = 1
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if changing {
			change(i)
		}
		if err := r.Relist(ctx); err != nil {
			b.Fatal(err)
		}
		if got := len(drain(r.Events())); got != want {
			b.Fatalf("relist %d reported %d pods, want %d", i, got, want)
		}
	}
}
