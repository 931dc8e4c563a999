package executor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodelet/nodelet/internal/kuberuntime"
)

func TestGarbage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ctr := func(id, name, sandbox string, state kuberuntime.ContainerState, age int) kuberuntime.Container {
		return kuberuntime.Container{ID: id, Name: name, SandboxID: sandbox, State: state, CreatedAt: t0.Add(time.Duration(-age) * time.Second)}
	}
	cases := []struct {
		name           string
		rt             kuberuntime.PodRuntime
		wantContainers []string
		wantSandboxes  []string
	}{
		{name: "nothing dead", rt: kuberuntime.PodRuntime{
			Sandboxes:  []kuberuntime.Sandbox{{ID: "s1", Ready: true}},
			Containers: []kuberuntime.Container{ctr("c1", "main", "s1", kuberuntime.ContainerRunning, 0)},
		}},
		{name: "older exited instances go, the newest stays", rt: kuberuntime.PodRuntime{
			Sandboxes: []kuberuntime.Sandbox{{ID: "s1", Ready: true}},
			Containers: []kuberuntime.Container{
				ctr("c3", "main", "s1", kuberuntime.ContainerExited, 0),
				ctr("c1", "main", "s1", kuberuntime.ContainerExited, 20),
				ctr("c2", "main", "s1", kuberuntime.ContainerExited, 10),
				ctr("o1", "other", "s1", kuberuntime.ContainerExited, 30),
			},
		}, wantContainers: []string{"c1", "c2"}},
		{name: "a dead old sandbox holding the last instance of a container stays", rt: kuberuntime.PodRuntime{
			Sandboxes: []kuberuntime.Sandbox{{ID: "s2", Ready: true}, {ID: "s1"}},
			Containers: []kuberuntime.Container{
				ctr("c1", "main", "s1", kuberuntime.ContainerExited, 20),
			},
		}},
		{name: "the previous run of a running container stays, older ones go", rt: kuberuntime.PodRuntime{
			Sandboxes: []kuberuntime.Sandbox{{ID: "s1", Ready: true}},
			Containers: []kuberuntime.Container{
				ctr("c3", "main", "s1", kuberuntime.ContainerRunning, 0),
				ctr("c2", "main", "s1", kuberuntime.ContainerExited, 10),
				ctr("c1", "main", "s1", kuberuntime.ContainerExited, 20),
			},
		}, wantContainers: []string{"c1"}},
		{name: "a dead old sandbox holding a previous run stays", rt: kuberuntime.PodRuntime{
			Sandboxes: []kuberuntime.Sandbox{{ID: "s2", Ready: true}, {ID: "s1"}},
			Containers: []kuberuntime.Container{
				ctr("c2", "main", "s2", kuberuntime.ContainerRunning, 0),
				ctr("c1", "main", "s1", kuberuntime.ContainerExited, 20),
			},
		}},
		{name: "a dead old sandbox whose containers are replaced goes", rt: kuberuntime.PodRuntime{
			Sandboxes: []kuberuntime.Sandbox{{ID: "s3", Ready: true}, {ID: "s2"}, {ID: "s1"}},
			Containers: []kuberuntime.Container{
				ctr("c3", "main", "s3", kuberuntime.ContainerRunning, 0),
				ctr("c2", "main", "s2", kuberuntime.ContainerExited, 10),
				ctr("c1", "main", "s1", kuberuntime.ContainerExited, 20),
			},
		}, wantContainers: []string{"c1"}, wantSandboxes: []string{"s1"}},
		{name: "the newest sandbox stays even when dead", rt: kuberuntime.PodRuntime{
			Sandboxes: []kuberuntime.Sandbox{{ID: "s1"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			containers, sandboxes := garbage(tc.rt)
			slices.Sort(containers)
			slices.Sort(sandboxes)
			if !slices.Equal(containers, tc.wantContainers) || !slices.Equal(sandboxes, tc.wantSandboxes) {
				t.Fatalf("garbage = %v, %v; want %v, %v", containers, sandboxes, tc.wantContainers, tc.wantSandboxes)
			}
		})
	}
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	content := "2026-11-22T05:00:00.000000000Z stdout F first line\n" +
		"2026-11-22T05:00:00.100000000Z stderr P partial \n" +
		"2026-11-22T05:00:00.200000000Z stderr F end\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := logTail(path), "first line\npartial end\n"; got != want {
		t.Fatalf("logTail = %q, want %q", got, want)
	}
	if got := logTail(filepath.Join(dir, "missing.log")); got != "" {
		t.Fatalf("logTail of a missing file = %q", got)
	}
}

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	cases := []struct {
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{port: intstr.FromInt32(9090), want: 9090},
		{port: intstr.FromString("http"), want: 8080},
		{port: intstr.FromString("8081"), want: 8081},
		{port: intstr.FromString("grpc"), wantErr: true},
	}
	for _, tc := range cases {
		got, err := resolvePort(tc.port, c)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("resolvePort(%v) = %d, %v; want %d, error %v", tc.port.String(), got, err, tc.want, tc.wantErr)
		}
	}
}
