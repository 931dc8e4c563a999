package planner

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Messages explaining why a new sandbox is needed (the kubelet's wording;
// also the message of a False PodReadyToStartContainers condition).
const (
	SandboxMsgNoSandbox         = "no pod sandbox exists"
	SandboxMsgMultipleReady     = "multiple pod sandboxes are ready and need to be reconciled"
	SandboxMsgNotReady          = "pod sandbox is not ready"
	SandboxMsgNetworkModeChange = "network namespace mode changed and sandbox needs to be recreated"
	SandboxMsgNoIP              = "pod sandbox has no IP address"
)

// Inputs is what ComputePodActions needs besides the pod, the runtime and
// the state.
type Inputs struct {
	// Now is the time of this plan.
	Now time.Time
	// Probes are the prober's latest results.
	Probes state.ProbeResults
	// MaxCrashLoopBackOff caps the crash-loop back-off (the node's
	// crashLoopBackOff.maxContainerRestartPeriod); zero is the kubelet's
	// state.MaxCrashLoopBackOff.
	MaxCrashLoopBackOff time.Duration
	// Eviction is set once the eviction manager evicted the pod, or the
	// node shutdown manager stopped it.
	Eviction *Eviction
}

// ComputePodActions plans what to do for a pod at now, like the kubelet's
// computePodActions: create or recreate the sandbox, run init containers one
// after the other (keeping restartable ones running), then start, restart
// or kill regular containers according to the restart policy, spec changes,
// probe failures and back-off; start each ephemeral container once, never
// restarting it. A pod being deleted or in a terminal phase, evicted
// (Inputs.Eviction), or past its active deadline (ActiveDeadline), only
// ever gets KillPod (or Done once nothing runs); a pod with a deadline ahead is requeued at it.
func ComputePodActions(pod *v1.Pod, rt state.PodRuntime, st state.PodState, in Inputs) plan.PodActions {
	p := actionPlanner{pod: pod, rt: rt, st: st, now: in.Now, probes: in.Probes, maxCrashLoop: in.MaxCrashLoopBackOff, eviction: in.Eviction}
	p.a.ContainersToKill = map[string]plan.ContainerKill{}
	p.a.BackingOff = map[string]plan.BackingOff{}
	p.plan()
	if p.a.KillPod {
		// Whatever runs is stopped; nothing starts in a sandbox that goes,
		// and nothing that stops is resized.
		p.a.EphemeralContainersToStart = nil
		p.a.ContainersToResize = nil
	}
	p.applyBackOff()
	p.applyDeadline()
	return p.a
}

type actionPlanner struct {
	pod          *v1.Pod
	rt           state.PodRuntime
	st           state.PodState
	now          time.Time
	probes       state.ProbeResults
	maxCrashLoop time.Duration
	eviction     *Eviction
	a            plan.PodActions
}

func (p *actionPlanner) plan() {
	if PodFinished(p.pod) {
		p.a.KillPod = p.rt.HasLiveResources()
		p.a.Done = !p.a.KillPod
		return
	}
	if Evicted(p.pod, p.eviction) {
		p.a.KillPod = p.rt.HasLiveResources()
		p.a.KillPodReason, p.a.KillPodMessage = p.eviction.ReasonOrEvicted(), p.eviction.Message
		p.a.Done = !p.a.KillPod
		return
	}
	if PastActiveDeadline(p.pod, p.st, p.now) {
		p.a.KillPod = p.rt.HasLiveResources()
		p.a.KillPodReason, p.a.KillPodMessage = ReasonDeadlineExceeded, MessageDeadlineExceeded
		p.a.Done = !p.a.KillPod
		return
	}
	p.a.CreateSandbox, p.a.Attempt, p.a.SandboxID, p.a.SandboxReason = sandboxChange(p.pod, p.rt, p.st)
	p.a.KillPod = p.a.CreateSandbox
	if p.a.CreateSandbox {
		p.planNewSandbox()
		return
	}
	// Ephemeral containers may start before the pod is initialized.
	p.planEphemeralContainers()
	if !p.planInitContainers() || p.a.KillPod {
		return
	}
	keep := p.planContainers()
	if keep == 0 && len(p.a.ContainersToStart) == 0 {
		// Nothing runs nor will: stop the sandbox. Restartable init
		// containers must not keep such a pod alive.
		p.a.KillPod = p.rt.HasLiveResources()
		p.a.InitContainersToStart = nil
	}
}

// PodFinished reports whether the pod's containers must all stop for
// good: it is being deleted or in a terminal phase.
func PodFinished(pod *v1.Pod) bool {
	return pod.DeletionTimestamp != nil ||
		pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// NewSandboxReason says why the pod needs a new sandbox (one of the
// SandboxMsg* messages), "" when it does not.
func NewSandboxReason(pod *v1.Pod, rt state.PodRuntime, st state.PodState) string {
	_, _, _, reason := sandboxChange(pod, rt, st)
	return reason
}

// sandboxChange reports whether the pod needs a new sandbox, with the
// attempt to create it with, the current sandbox ID and the reason.
func sandboxChange(pod *v1.Pod, rt state.PodRuntime, st state.PodState) (bool, uint32, string, string) {
	sb := rt.NewestSandbox()
	if sb == nil {
		var attempt uint32
		if st.SandboxID != "" {
			attempt = st.SandboxAttempt + 1
		}
		return true, attempt, "", SandboxMsgNoSandbox
	}
	ready := 0
	for _, s := range rt.Sandboxes {
		if s.Ready {
			ready++
		}
	}
	switch {
	case ready > 1:
		return true, sb.Attempt + 1, sb.ID, SandboxMsgMultipleReady
	case !sb.Ready:
		return true, sb.Attempt + 1, sb.ID, SandboxMsgNotReady
	case sb.HostNetwork != pod.Spec.HostNetwork:
		return true, sb.Attempt + 1, "", SandboxMsgNetworkModeChange
	case !pod.Spec.HostNetwork && len(sb.IPs) == 0:
		return true, sb.Attempt + 1, sb.ID, SandboxMsgNoIP
	}
	return false, sb.Attempt, sb.ID, ""
}

// planNewSandbox plans the starts in a sandbox about to be (re)created.
func (p *actionPlanner) planNewSandbox() {
	if p.pod.Spec.RestartPolicy == v1.RestartPolicyNever && p.a.Attempt != 0 && len(p.rt.Containers) > 0 {
		// Every container has had its single run: report, do not recreate.
		p.a.CreateSandbox = false
		p.a.KillPod = p.rt.HasLiveResources()
		return
	}
	var starts []plan.ContainerStart
	for i := range p.pod.Spec.Containers {
		c := &p.pod.Spec.Containers[i]
		if runsOnce(p.pod, c) && Succeeded(p.rt.Latest(c.Name)) {
			continue
		}
		starts = append(starts, p.start(c, i, false))
	}
	if len(starts) == 0 && AnyRegularContainerCreated(p.pod, p.rt) {
		p.a.CreateSandbox = false
		p.a.KillPod = p.rt.HasLiveResources()
		return
	}
	if len(p.pod.Spec.InitContainers) > 0 {
		p.a.InitContainersToStart = []plan.ContainerStart{p.start(&p.pod.Spec.InitContainers[0], 0, true)}
		return
	}
	p.a.ContainersToStart = starts
}

// planInitContainers plans the init containers in the current sandbox and
// reports whether the pod is initialized. Walking the list backwards finds
// the last init container that ran; the ones before it are done (their
// instances may have been removed), except restartable ones, which must
// keep running.
func (p *actionPlanner) planInitContainers() bool {
	inits := p.pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	initialized := p.anyRegularContainerStarted()
	seenLater := initialized
	var starts []int
	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := IsSidecar(c)
		inst := p.active(c.Name)
		if inst == nil {
			if seenLater && sidecar {
				starts = append(starts, i)
			}
			continue
		}
		if seenLater && !sidecar {
			continue
		}
		switch inst.State {
		case state.ContainerCreated:
			// Created but never started: start it again.
			starts = append(starts, i)
		case state.ContainerRunning:
			if sidecar {
				starts = append(starts, p.planRunningSidecar(c, i, inst, seenLater, &initialized)...)
			} else {
				p.planResize(c, i, true, inst)
			}
		case state.ContainerExited:
			switch {
			case sidecar:
				starts = append(starts, i)
			case inst.ExitCode != 0:
				if !ShouldRestartExited(p.pod, c, inst.ExitCode) {
					p.a.KillPod = true
					p.a.InitContainersToStart = nil
					return false
				}
				starts = append(starts, i)
			case i == len(inits)-1:
				initialized = true
			default:
				starts = append(starts, i+1)
			}
		default:
			if !sidecar && !shouldRestartUnknown(p.pod, c) {
				p.a.KillPod = true
				p.a.InitContainersToStart = nil
				return false
			}
			p.kill(inst, c, plan.KillUnknownState, fmt.Sprintf("Init container is in %q state, try killing it before restart", inst.State))
			starts = append(starts, i)
		}
		seenLater = true
	}
	if !seenLater {
		starts = append(starts, 0)
	}
	slices.Sort(starts)
	for _, i := range slices.Compact(starts) {
		p.a.InitContainersToStart = append(p.a.InitContainersToStart, p.start(&inits[i], i, true))
	}
	return initialized
}

// planRunningSidecar handles a running restartable init container: once it
// has started (its startup probe succeeded) the next init container may
// start; a failed probe or a changed spec restarts it. It returns the init
// container indexes to start.
func (p *actionPlanner) planRunningSidecar(c *v1.Container, i int, inst *state.Container, seenLater bool, initialized *bool) []int {
	if c.StartupProbe != nil {
		ok, found := p.probes.Startup[inst.ID]
		if !found {
			return nil
		}
		if !ok {
			p.kill(inst, c, plan.KillStartupProbe, fmt.Sprintf("Init container %s failed startup probe", c.Name))
			return []int{i}
		}
	}
	var starts []int
	if i == len(p.pod.Spec.InitContainers)-1 {
		*initialized = true
	} else if !seenLater {
		starts = append(starts, i+1)
	}
	if hashChanged(c, inst) {
		p.kill(inst, c, plan.KillSpecChanged, fmt.Sprintf("Init container %s definition changed", c.Name))
		return append(starts, i)
	}
	if c.LivenessProbe != nil {
		if ok, found := p.probes.Liveness[inst.ID]; found && !ok {
			p.kill(inst, c, plan.KillLivenessProbe, fmt.Sprintf("Init container %s failed liveness probe", c.Name))
			return append(starts, i)
		}
	}
	if restart, msg := p.planResize(c, i, true, inst); restart {
		p.kill(inst, c, plan.KillResize, msg)
		return append(starts, i)
	}
	return starts
}

// planContainers plans the regular containers and returns how many keep running.
func (p *actionPlanner) planContainers() int {
	keep := 0
	for i := range p.pod.Spec.Containers {
		c := &p.pod.Spec.Containers[i]
		inst := p.rt.Latest(c.Name)
		if inst == nil || inst.State != state.ContainerRunning {
			if ShouldRestart(p.pod, c, inst) {
				p.a.ContainersToStart = append(p.a.ContainersToStart, p.start(c, i, false))
				if inst != nil && inst.State == state.ContainerUnknown {
					p.kill(inst, c, plan.KillUnknownState, fmt.Sprintf("Container is in %q state, try killing it before restart", inst.State))
				}
			}
			continue
		}
		restart := p.pod.Spec.RestartPolicy != v1.RestartPolicyNever
		if c.RestartPolicy != nil {
			restart = *c.RestartPolicy != v1.ContainerRestartPolicyNever
		}
		var reason plan.KillReason
		var msg string
		switch {
		case hashChanged(c, inst):
			reason, msg, restart = plan.KillSpecChanged, fmt.Sprintf("Container %s definition changed", c.Name), true
		case failed(p.probes.Liveness, inst.ID):
			reason, msg = plan.KillLivenessProbe, fmt.Sprintf("Container %s failed liveness probe", c.Name)
		case failed(p.probes.Startup, inst.ID):
			reason, msg = plan.KillStartupProbe, fmt.Sprintf("Container %s failed startup probe", c.Name)
		default:
			if resize, resizeMsg := p.planResize(c, i, false, inst); resize {
				// Restarted with its new resources, whatever the restart policy.
				p.a.ContainersToStart = append(p.a.ContainersToStart, p.start(c, i, false))
				p.kill(inst, c, plan.KillResize, resizeMsg)
				continue
			}
			keep++
			continue
		}
		if restart {
			msg += ", will be restarted"
			p.a.ContainersToStart = append(p.a.ContainersToStart, p.start(c, i, false))
		}
		p.kill(inst, c, reason, msg)
	}
	return keep
}

func failed(results map[string]bool, id string) bool {
	ok, found := results[id]
	return found && !ok
}

// applyBackOff moves the starts that must wait out of the start lists.
func (p *actionPlanner) applyBackOff() {
	p.a.InitContainersToStart = p.filterBackOff(p.a.InitContainersToStart)
	p.a.ContainersToStart = p.filterBackOff(p.a.ContainersToStart)
	p.a.EphemeralContainersToStart = p.filterBackOff(p.a.EphemeralContainersToStart)
}

// applyDeadline has a pod that will keep running requeued when its active
// deadline ends, so it is stopped then and not at the next periodic sync.
func (p *actionPlanner) applyDeadline() {
	if p.a.Done || p.a.KillPodReason != "" || PodFinished(p.pod) {
		return
	}
	_, left := ActiveDeadline(p.pod, podStartTime(p.pod, p.st), p.now)
	if left > 0 && (p.a.RequeueAfter == 0 || left < p.a.RequeueAfter) {
		p.a.RequeueAfter = left
	}
}

func (p *actionPlanner) filterBackOff(starts []plan.ContainerStart) []plan.ContainerStart {
	kept := starts[:0]
	for _, s := range starts {
		b, wait := ContainerBackOff(p.pod, s.Spec(p.pod), p.rt, p.st, p.now, p.maxCrashLoop)
		if !wait {
			kept = append(kept, s)
			continue
		}
		p.a.BackingOff[s.Name] = b
		if d := b.Until.Sub(p.now); p.a.RequeueAfter == 0 || d < p.a.RequeueAfter {
			p.a.RequeueAfter = d
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

func (p *actionPlanner) start(c *v1.Container, index int, init bool) plan.ContainerStart {
	s := plan.ContainerStart{
		Name: c.Name, Index: index, Init: init,
		RestartCount:        nextRestartCount(p.rt, p.st, c.Name),
		MaxCrashLoopBackOff: p.maxCrashLoop,
		// As the kubelet kills a container whose postStart hook failed.
		KillGracePeriodSeconds: GracePeriodSeconds(p.pod),
	}
	if prev := p.rt.LatestExited(c.Name); prev != nil {
		s.PrevFinishedAt = prev.FinishedAt
	}
	return s
}

func (p *actionPlanner) kill(inst *state.Container, c *v1.Container, reason plan.KillReason, msg string) {
	k := plan.ContainerKill{Name: c.Name, Reason: reason, Message: msg, GracePeriodSeconds: killGracePeriod(p.pod, c, reason)}
	if c.Lifecycle != nil {
		k.PreStop = c.Lifecycle.PreStop
	}
	p.a.ContainersToKill[inst.ID] = k
}

// active returns the newest instance of a container in the current sandbox.
func (p *actionPlanner) active(name string) *state.Container {
	if all := p.rt.Instances(name, p.a.SandboxID); len(all) > 0 {
		return &all[0]
	}
	return nil
}

// anyRegularContainerStarted reports whether a regular container has run in
// the current sandbox, which means the pod was initialized.
func (p *actionPlanner) anyRegularContainerStarted() bool {
	return Initialized(p.pod, p.rt, p.a.SandboxID)
}

// Initialized reports whether a regular container of the pod has run
// (is running or exited) in the sandbox sandboxID, which means the pod was
// initialized there.
func Initialized(pod *v1.Pod, rt state.PodRuntime, sandboxID string) bool {
	for _, c := range pod.Spec.Containers {
		for _, inst := range rt.Instances(c.Name, sandboxID) {
			if inst.State == state.ContainerRunning || inst.State == state.ContainerExited {
				return true
			}
		}
	}
	return false
}

// AnyRegularContainerCreated reports whether a regular container of the
// pod was ever created, in any sandbox.
func AnyRegularContainerCreated(pod *v1.Pod, rt state.PodRuntime) bool {
	for _, c := range pod.Spec.Containers {
		if inst := rt.Latest(c.Name); inst != nil && inst.State != state.ContainerUnknown {
			return true
		}
	}
	return false
}

// nextRestartCount is the restart count of the next instance of a container:
// one more than the newest instance, or than the newest start recorded when
// the runtime no longer has it.
func nextRestartCount(rt state.PodRuntime, st state.PodState, name string) uint32 {
	var next uint32
	if inst := rt.Latest(name); inst != nil {
		next = inst.Attempt + 1
	}
	if r, ok := st.Containers[name]; ok {
		n := r.RestartCount
		if r.Created {
			n++
		}
		next = max(next, n)
	}
	return next
}

// hashChanged reports whether a container instance was created from a spec
// that differs from c. Instances without a hash label are not judged.
func hashChanged(c *v1.Container, instance *state.Container) bool {
	return instance.Hash != "" && instance.Hash != podspec.ContainerHash(c)
}
