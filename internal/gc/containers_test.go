package gc

import (
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

var t0 = time.Unix(10000, 0)

func ctr(id, name, sandbox string, cs state.ContainerState, age int) state.Container {
	return state.Container{ID: id, Name: name, SandboxID: sandbox, State: cs, CreatedAt: t0.Add(time.Duration(-age) * time.Second)}
}

func sb(id string, ready bool, age int) state.Sandbox {
	return state.Sandbox{ID: id, Ready: ready, CreatedAt: t0.Add(time.Duration(-age) * time.Second)}
}

func pod(uid string, live bool, sandboxes []state.Sandbox, containers ...state.Container) PodObjects {
	return PodObjects{UID: types.UID(uid), Live: live, Runtime: state.PodRuntime{Sandboxes: sandboxes, Containers: containers}}
}

// ids flattens a selection to sorted container and sandbox IDs.
func ids(g map[types.UID]plan.Garbage) (containers, sandboxes []string) {
	for _, uid := range slices.Sorted(maps.Keys(g)) {
		for _, c := range g[uid].Containers {
			containers = append(containers, c.ID)
		}
		sandboxes = append(sandboxes, g[uid].Sandboxes...)
	}
	slices.Sort(containers)
	slices.Sort(sandboxes)
	return containers, sandboxes
}

func TestSelectContainers(t *testing.T) {
	ready := []state.Sandbox{sb("s1", true, 100)}
	noLimit := ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1}
	cases := []struct {
		name           string
		pods           []PodObjects
		policy         ContainerPolicy
		wantContainers []string
		wantSandboxes  []string
	}{
		{
			name:   "nothing dead",
			pods:   []PodObjects{pod("a", true, ready, ctr("a1", "main", "s1", state.ContainerRunning, 1))},
			policy: noLimit,
		},
		{
			name: "live pod: maxPerPodContainer newest exited instances stay per container",
			pods: []PodObjects{pod("a", true, ready,
				ctr("a4", "main", "s1", state.ContainerRunning, 1),
				ctr("a3", "main", "s1", state.ContainerExited, 10),
				ctr("a2", "main", "s1", state.ContainerExited, 20),
				ctr("a1", "main", "s1", state.ContainerExited, 30),
				ctr("b2", "side", "s1", state.ContainerExited, 10),
				ctr("b1", "side", "s1", state.ContainerExited, 20),
			)},
			policy:         ContainerPolicy{MaxPerPodContainer: 2, MaxContainers: -1},
			wantContainers: []string{"a1"},
		},
		{
			name: "minimum age protects young instances",
			pods: []PodObjects{pod("a", true, ready,
				ctr("a3", "main", "s1", state.ContainerExited, 1),
				ctr("a2", "main", "s1", state.ContainerExited, 5),
				ctr("a1", "main", "s1", state.ContainerExited, 60),
			)},
			policy:         ContainerPolicy{MinAge: 30 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1},
			wantContainers: []string{"a1"},
		},
		{
			name: "gone pod: every exited container and every dead sandbox go, the running stay",
			pods: []PodObjects{pod("g", false, []state.Sandbox{sb("s2", false, 10), sb("s1", false, 100)},
				ctr("g2", "main", "s2", state.ContainerExited, 5),
				ctr("g1", "main", "s1", state.ContainerExited, 50),
				ctr("h1", "side", "s1", state.ContainerRunning, 50),
			)},
			policy:         noLimit,
			wantContainers: []string{"g1", "g2"},
			wantSandboxes:  []string{"s2"},
		},
		{
			name: "gone pod: minimum age still applies",
			pods: []PodObjects{pod("g", false, []state.Sandbox{sb("s1", false, 100)},
				ctr("g2", "main", "s1", state.ContainerExited, 5),
				ctr("g1", "main", "s1", state.ContainerExited, 50),
			)},
			policy:         ContainerPolicy{MinAge: 30 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1},
			wantContainers: []string{"g1"},
		},
		{
			name: "live pod: not-ready old sandbox without containers goes, the newest stays even dead",
			pods: []PodObjects{pod("a", true, []state.Sandbox{sb("s3", false, 10), sb("s2", false, 50), sb("s1", false, 100), sb("s0", true, 200)},
				ctr("a2", "main", "s2", state.ContainerExited, 40),
			)},
			policy:        noLimit,
			wantSandboxes: []string{"s1"},
		},
		{
			name: "maxContainers spreads across containers: each keeps MaxContainers/units, newest",
			pods: []PodObjects{
				pod("a", true, ready,
					ctr("a4", "main", "s1", state.ContainerExited, 10),
					ctr("a3", "main", "s1", state.ContainerExited, 20),
					ctr("a2", "main", "s1", state.ContainerExited, 30),
					ctr("a1", "main", "s1", state.ContainerExited, 40)),
				pod("b", true, ready,
					ctr("b3", "main", "s1", state.ContainerExited, 15),
					ctr("b2", "main", "s1", state.ContainerExited, 25),
					ctr("b1", "main", "s1", state.ContainerExited, 35)),
			},
			policy:         ContainerPolicy{MaxPerPodContainer: 5, MaxContainers: 4},
			wantContainers: []string{"a1", "a2", "b1"},
		},
		{
			name: "maxContainers not a multiple: the share per container is rounded down",
			pods: []PodObjects{
				pod("a", true, ready,
					ctr("a3", "main", "s1", state.ContainerExited, 10),
					ctr("a2", "main", "s1", state.ContainerExited, 20),
					ctr("a1", "main", "s1", state.ContainerExited, 30)),
				pod("b", true, ready,
					ctr("b3", "main", "s1", state.ContainerExited, 15),
					ctr("b2", "main", "s1", state.ContainerExited, 25),
					ctr("b1", "main", "s1", state.ContainerExited, 35)),
			},
			policy:         ContainerPolicy{MaxPerPodContainer: 5, MaxContainers: 5},
			wantContainers: []string{"a1", "b1"},
		},
		{
			name: "maxContainers below the number of containers: one each, then the oldest across the node",
			pods: []PodObjects{
				pod("a", true, ready,
					ctr("a3", "main", "s1", state.ContainerExited, 1),
					ctr("a2", "main", "s1", state.ContainerExited, 20),
					ctr("a1", "main", "s1", state.ContainerExited, 30)),
				pod("b", true, ready,
					ctr("b2", "main", "s1", state.ContainerExited, 15),
					ctr("b1", "main", "s1", state.ContainerExited, 25)),
			},
			// a3 is too young to count; b2 is b's newest exited instance.
			policy:         ContainerPolicy{MinAge: 5 * time.Second, MaxPerPodContainer: 5, MaxContainers: 1},
			wantContainers: []string{"a1", "a2", "b1"},
		},
		{
			name: "maxContainers 0 keeps the newest exited instance of live pods, not of gone ones",
			pods: []PodObjects{
				pod("a", true, ready,
					ctr("a2", "main", "s1", state.ContainerExited, 10),
					ctr("a1", "main", "s1", state.ContainerExited, 20)),
				pod("g", false, []state.Sandbox{sb("t1", false, 100)},
					ctr("g1", "main", "t1", state.ContainerExited, 5)),
			},
			policy:         ContainerPolicy{MaxPerPodContainer: 5, MaxContainers: 0},
			wantContainers: []string{"a1", "g1"},
			wantSandboxes:  []string{"t1"},
		},
		{
			name: "maxContainers counts only containers old enough",
			pods: []PodObjects{pod("a", true, ready,
				ctr("a3", "main", "s1", state.ContainerExited, 1),
				ctr("a2", "main", "s1", state.ContainerExited, 50),
				ctr("a1", "main", "s1", state.ContainerExited, 60))},
			policy:         ContainerPolicy{MinAge: 30 * time.Second, MaxPerPodContainer: 5, MaxContainers: 1},
			wantContainers: []string{"a1"},
		},
		{
			name: "under maxContainers nothing more goes",
			pods: []PodObjects{pod("a", true, ready,
				ctr("a2", "main", "s1", state.ContainerExited, 10),
				ctr("a1", "main", "s1", state.ContainerExited, 20))},
			policy: ContainerPolicy{MaxPerPodContainer: 5, MaxContainers: 2},
		},
		{
			name: "a sandbox emptied by the node limit goes",
			pods: []PodObjects{pod("a", true, []state.Sandbox{sb("s2", true, 10), sb("s1", false, 100)},
				ctr("a2", "main", "s2", state.ContainerExited, 10),
				ctr("a1", "main", "s1", state.ContainerExited, 90))},
			policy:         ContainerPolicy{MaxPerPodContainer: 5, MaxContainers: 1},
			wantContainers: []string{"a1"},
			wantSandboxes:  []string{"s1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gotC, gotS := ids(SelectContainers(tc.pods, tc.policy, t0))
			if !slices.Equal(gotC, tc.wantContainers) || !slices.Equal(gotS, tc.wantSandboxes) {
				t.Fatalf("SelectContainers = %v, %v; want %v, %v", gotC, gotS, tc.wantContainers, tc.wantSandboxes)
			}
		})
	}
}

func TestSelectAllUnused(t *testing.T) {
	pods := []PodObjects{
		pod("a", true, []state.Sandbox{sb("s2", true, 10), sb("s1", false, 100)},
			ctr("a3", "main", "s2", state.ContainerRunning, 5),
			ctr("a2", "main", "s2", state.ContainerExited, 10),
			ctr("a1", "main", "s1", state.ContainerExited, 90),
			ctr("b1", "side", "s1", state.ContainerExited, 90)),
		pod("g", false, []state.Sandbox{sb("t1", false, 100)},
			ctr("g1", "main", "t1", state.ContainerExited, 5)),
	}
	gotC, gotS := ids(SelectAllUnused(pods, 0, t0))
	// b1 is side's newest exited instance: it stays, and holds s1.
	if want := []string{"a1", "g1"}; !slices.Equal(gotC, want) {
		t.Errorf("containers = %v, want %v", gotC, want)
	}
	if want := []string{"t1"}; !slices.Equal(gotS, want) {
		t.Errorf("sandboxes = %v, want %v", gotS, want)
	}
}
