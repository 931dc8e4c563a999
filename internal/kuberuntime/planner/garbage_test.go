package planner

import (
	"slices"
	"testing"
	"time"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

func TestSelectGarbage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ctr := func(id, name, sandbox string, cs state.ContainerState, age int) state.Container {
		return state.Container{ID: id, Name: name, SandboxID: sandbox, State: cs, CreatedAt: t0.Add(time.Duration(-age) * time.Second)}
	}
	cases := []struct {
		name           string
		rt             state.PodRuntime
		policy         *GarbagePolicy
		wantContainers []string
		wantSandboxes  []string
	}{
		{name: "nothing dead", rt: state.PodRuntime{
			Sandboxes:  []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{ctr("c1", "main", "s1", state.ContainerRunning, 0)},
		}},
		{name: "older exited instances go, the newest stays", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{
				ctr("c3", "main", "s1", state.ContainerExited, 0),
				ctr("c1", "main", "s1", state.ContainerExited, 20),
				ctr("c2", "main", "s1", state.ContainerExited, 10),
				ctr("o1", "other", "s1", state.ContainerExited, 30),
			},
		}, wantContainers: []string{"c1", "c2"}},
		{name: "a running container keeps its previous instance", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{
				ctr("c3", "main", "s1", state.ContainerRunning, 0),
				ctr("c2", "main", "s1", state.ContainerExited, 10),
				ctr("c1", "main", "s1", state.ContainerExited, 20),
			},
		}, wantContainers: []string{"c1"}},
		{name: "a created container keeps its previous instance", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{
				ctr("c2", "main", "s1", state.ContainerCreated, 0),
				ctr("c1", "main", "s1", state.ContainerExited, 20),
			},
		}},
		{name: "a dead old sandbox holding the last instance of a container stays", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s2", Ready: true}, {ID: "s1"}},
			Containers: []state.Container{
				ctr("c1", "main", "s1", state.ContainerExited, 20),
			},
		}},
		{name: "a dead old sandbox holding the previous instance stays", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s2", Ready: true}, {ID: "s1"}},
			Containers: []state.Container{
				ctr("c2", "main", "s2", state.ContainerRunning, 0),
				ctr("c1", "main", "s1", state.ContainerExited, 20),
			},
		}},
		{name: "a dead old sandbox whose containers are all replaced goes", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s2", Ready: true}, {ID: "s1"}},
			Containers: []state.Container{
				ctr("c3", "main", "s2", state.ContainerRunning, 0),
				ctr("c2", "main", "s2", state.ContainerExited, 10),
				ctr("c1", "main", "s1", state.ContainerExited, 20),
			},
		}, wantContainers: []string{"c1"}, wantSandboxes: []string{"s1"}},
		{name: "maxPerPodContainer keeps that many newest exited instances", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{
				ctr("c4", "main", "s1", state.ContainerRunning, 0),
				ctr("c3", "main", "s1", state.ContainerExited, 10),
				ctr("c2", "main", "s1", state.ContainerExited, 20),
				ctr("c1", "main", "s1", state.ContainerExited, 30),
				ctr("o1", "other", "s1", state.ContainerExited, 30),
			},
		}, policy: &GarbagePolicy{MaxPerPodContainer: 2, Now: t0}, wantContainers: []string{"c1"}},
		{name: "maxPerPodContainer below 1 still keeps the newest exited instance", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{
				ctr("c2", "main", "s1", state.ContainerExited, 10),
				ctr("c1", "main", "s1", state.ContainerExited, 20),
			},
		}, policy: &GarbagePolicy{MaxPerPodContainer: 0, Now: t0}, wantContainers: []string{"c1"}},
		{name: "instances younger than the minimum age stay", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{
				ctr("c4", "main", "s1", state.ContainerExited, 5),
				ctr("c3", "main", "s1", state.ContainerExited, 15),
				ctr("c2", "main", "s1", state.ContainerExited, 25),
				ctr("c1", "main", "s1", state.ContainerExited, 35),
			},
		}, policy: &GarbagePolicy{MinAge: 20 * time.Second, MaxPerPodContainer: 1, Now: t0}, wantContainers: []string{"c1", "c2"}},
		{name: "unknown and created instances are never garbage", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1", Ready: true}},
			Containers: []state.Container{
				ctr("c3", "main", "s1", state.ContainerExited, 5),
				ctr("c2", "main", "s1", state.ContainerUnknown, 15),
				ctr("c1", "main", "s1", state.ContainerCreated, 25),
			},
		}},
		{name: "the newest sandbox stays even when dead", rt: state.PodRuntime{
			Sandboxes: []state.Sandbox{{ID: "s1"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultGarbagePolicy(t0)
			if tc.policy != nil {
				p = *tc.policy
			}
			g := SelectGarbage(tc.rt, p)
			var containers []string
			for _, c := range g.Containers {
				containers = append(containers, c.ID)
			}
			slices.Sort(containers)
			slices.Sort(g.Sandboxes)
			if !slices.Equal(containers, tc.wantContainers) || !slices.Equal(g.Sandboxes, tc.wantSandboxes) {
				t.Fatalf("SelectGarbage = %v, %v; want %v, %v", containers, g.Sandboxes, tc.wantContainers, tc.wantSandboxes)
			}
		})
	}
}
