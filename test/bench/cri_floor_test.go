package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// criWorkers is how many pods nodelet syncs at once
	// (controller.MaxConcurrentPodSyncs): the floor uses the same
	// parallelism against the runtime.
	criWorkers = 16
	// criTimeout bounds one CRI call, as nodelet's default request timeout.
	criTimeout = 2 * time.Minute
	// floorLabel marks the floor's sandboxes, so that its checks and
	// teardown never see anything else on the containerd.
	floorLabel = "bench.nodelet.io/floor"
)

// criFloor starts pods straight through the CRI, with the configs nodelet
// sends for a plain busybox pod minus what only an agent adds on top
// (volumes, environment, DNS): the least any agent pays the runtime.
type criFloor struct {
	rs      internalapi.RuntimeService
	logRoot string
	run     string
	seq     atomic.Int64
	// calls counts the CRI calls that start pods.
	calls atomic.Int64
}

// floorPod is one pod started by the floor.
type floorPod struct {
	sandbox, container string
}

func newCRIFloor(b *testing.B, ctrd *utils.Containerd) *criFloor {
	b.Helper()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(ctrd.Endpoint()).
		WithConnectionTimeout(criTimeout).
		WithTracerProvider(nil).
		Build(klog.NewContext(b.Context(), logr.Discard()))
	if err != nil {
		b.Fatalf("connecting to the CRI: %v", err)
	}
	b.Cleanup(func() { _ = rs.Close(context.Background()) })
	return &criFloor{rs: rs, logRoot: b.TempDir(), run: string(uuid.NewUUID())[:8]}
}

// startPod runs a sandbox and a busybox `sleep 3600` container in it, the
// calls nodelet makes for one pod: RunPodSandbox, CreateContainer,
// StartContainer (the container runs when StartContainer returns).
func (f *criFloor) startPod(ctx context.Context) (floorPod, error) {
	n := f.seq.Add(1)
	name, ns, uid := fmt.Sprintf("floor-%d", n), "bench-floor", string(uuid.NewUUID())
	logDir := filepath.Join(f.logRoot, fmt.Sprintf("%s_%s_%s", ns, name, uid))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return floorPod{}, fmt.Errorf("creating the log directory of %s: %w", name, err)
	}
	nsOpts := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	sandboxConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
		Hostname:     name,
		LogDirectory: logDir,
		Labels: map[string]string{
			kubetypes.KubernetesPodNameLabel:      name,
			kubetypes.KubernetesPodNamespaceLabel: ns,
			kubetypes.KubernetesPodUIDLabel:       uid,
			floorLabel:                            f.run,
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: nsOpts,
				Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
		},
	}
	f.calls.Add(1)
	sandboxID, err := f.rs.RunPodSandbox(ctx, sandboxConfig, "")
	if err != nil {
		return floorPod{}, fmt.Errorf("running sandbox %s: %w", name, err)
	}
	p := floorPod{sandbox: sandboxID}
	f.calls.Add(1)
	p.container, err = f.rs.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: utils.BusyboxImage, UserSpecifiedImage: utils.BusyboxImage},
		Command:  []string{"sleep", "3600"},
		Labels: map[string]string{
			kubetypes.KubernetesPodNameLabel:       name,
			kubetypes.KubernetesPodNamespaceLabel:  ns,
			kubetypes.KubernetesPodUIDLabel:        uid,
			kubetypes.KubernetesContainerNameLabel: "main",
		},
		LogPath: filepath.Join("main", "0.log"),
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: nsOpts},
		},
	}, sandboxConfig)
	if err != nil {
		return p, fmt.Errorf("creating the container of %s: %w", name, err)
	}
	f.calls.Add(1)
	if err := f.rs.StartContainer(ctx, p.container); err != nil {
		return p, fmt.Errorf("starting the container of %s: %w", name, err)
	}
	return p, nil
}

// removePod stops the container with a one-second grace period (what the
// benchmark pods have), then stops and removes the sandbox.
func (f *criFloor) removePod(ctx context.Context, p floorPod) error {
	var errs []error
	if p.container != "" {
		if err := f.rs.StopContainer(ctx, p.container, 1); err != nil {
			errs = append(errs, fmt.Errorf("stopping container %s: %w", p.container, err))
		}
	}
	if p.sandbox != "" {
		if err := f.rs.StopPodSandbox(ctx, p.sandbox); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", p.sandbox, err))
		} else if err := f.rs.RemovePodSandbox(ctx, p.sandbox); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", p.sandbox, err))
		}
	}
	return errors.Join(errs...)
}

// burst starts n pods on workers goroutines and returns the time until all
// of them run; then it checks that the runtime lists them all running and
// removes them, timing the removal with the same parallelism.
func (f *criFloor) burst(ctx context.Context, n, workers int) (start, remove time.Duration, err error) {
	r, err := f.timedBurst(ctx, n, workers)
	return r.start, r.remove, err
}

// floorBurst is what one burst straight through the CRI took: start until
// all ran, each pod's time from the burst's start until its container ran,
// and the removal of all.
type floorBurst struct {
	start, remove time.Duration
	running       []time.Duration
	// cpuStart is where the machine's CPU went while the pods started;
	// criCalls are the CRI calls that started them.
	cpuStart cpuSplit
	criCalls int64
}

// timedBurst is burst, with each pod's time to running.
func (f *criFloor) timedBurst(ctx context.Context, n, workers int) (floorBurst, error) {
	var r floorBurst
	pods := make([]floorPod, n)
	r.running = make([]time.Duration, n)
	cpu0, err := readCPUSplit()
	if err != nil {
		return r, err
	}
	calls0 := f.calls.Load()
	t0 := time.Now()
	startErr := forEach(n, workers, func(i int) error {
		var err error
		pods[i], err = f.startPod(ctx)
		r.running[i] = time.Since(t0)
		return err
	})
	r.start = time.Since(t0)
	r.criCalls = f.calls.Load() - calls0
	cpu1, err := readCPUSplit()
	if err != nil {
		return r, err
	}
	r.cpuStart = cpu1.sub(cpu0)
	if startErr == nil {
		startErr = f.checkRunning(ctx, n)
	}
	t1 := time.Now()
	removeErr := forEach(n, criWorkers, func(i int) error { return f.removePod(ctx, pods[i]) })
	r.remove = time.Since(t1)
	return r, errors.Join(startErr, removeErr)
}

// clearRuntime stops and removes every sandbox on the containerd, whoever
// made it, and so every container: what an agent left behind before the
// next agent starts (the kubelet keeps the exited sandboxes of deleted pods
// until its garbage collection, and would remove anything another agent
// made).
func (f *criFloor) clearRuntime(ctx context.Context) error {
	sandboxes, err := f.rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	var errs []error
	for _, s := range sandboxes {
		if err := f.rs.StopPodSandbox(ctx, s.GetId()); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", s.GetId(), err))
			continue
		}
		// A killed container may still be seen running for a while on
		// a busy machine: stop the sandbox's containers themselves, and
		// try again for up to clearRetryFor.
		var err error
		deadline := time.Now().Add(clearRetryFor)
		for attempt := 0; ; attempt++ {
			if attempt > 0 {
				time.Sleep(200 * time.Millisecond)
				f.stopContainersOf(ctx, s.GetId())
				_ = f.rs.StopPodSandbox(ctx, s.GetId())
			}
			if err = f.rs.RemovePodSandbox(ctx, s.GetId()); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", s.GetId(), err))
		}
	}
	return errors.Join(errs...)
}

// clearRetryFor bounds the tries to remove one sandbox in clearRuntime.
const clearRetryFor = 30 * time.Second

// stopContainersOf stops the sandbox's containers at once; errors are left
// to the removal that follows.
func (f *criFloor) stopContainersOf(ctx context.Context, sandbox string) {
	containers, err := f.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandbox})
	if err != nil {
		return
	}
	for _, c := range containers {
		_ = f.rs.StopContainer(ctx, c.GetId(), 0)
	}
}

// runtimeObjects returns the IDs of every sandbox and container on the
// containerd, whoever made them.
func (f *criFloor) runtimeObjects(ctx context.Context) (map[string]bool, error) {
	sandboxes, err := f.rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	containers, err := f.rs.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	ids := make(map[string]bool, len(sandboxes)+len(containers))
	for _, s := range sandboxes {
		ids[s.GetId()] = true
	}
	for _, c := range containers {
		ids[c.GetId()] = true
	}
	return ids, nil
}

// runtimeVersion is the runtime's name and version, as the CRI tells it.
func (f *criFloor) runtimeVersion(ctx context.Context) string {
	v, err := f.rs.Version(ctx, "v1")
	if err != nil {
		return "unknown runtime"
	}
	return v.GetRuntimeName() + " " + v.GetRuntimeVersion()
}

// checkRunning makes sure the runtime lists n running containers of this
// floor's pods.
func (f *criFloor) checkRunning(ctx context.Context, n int) error {
	sandboxes, err := f.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{floorLabel: f.run}})
	if err != nil {
		return fmt.Errorf("listing the floor's sandboxes: %w", err)
	}
	mine := map[string]bool{}
	for _, s := range sandboxes {
		mine[s.GetId()] = true
	}
	containers, err := f.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return fmt.Errorf("listing running containers: %w", err)
	}
	running := 0
	for _, c := range containers {
		if mine[c.GetPodSandboxId()] {
			running++
		}
	}
	if running != n {
		return fmt.Errorf("the runtime lists %d running floor containers, want %d", running, n)
	}
	return nil
}

// single starts one pod and returns how long that took, then removes it.
func (f *criFloor) single(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	p, err := f.startPod(ctx)
	d := time.Since(t0)
	return d, errors.Join(err, f.removePod(ctx, p))
}
