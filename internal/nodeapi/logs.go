package nodeapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// LogRequest is a parsed /containerLogs query.
type LogRequest struct {
	Options  logs.LogOptions
	Previous bool
}

// errBadRequest marks errors in what the client asked for (400).
var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// ParseLogRequest reads the kubelet's /containerLogs parameters (those of
// PodLogOptions): follow, previous, timestamps, tailLines, limitBytes,
// sinceSeconds or sinceTime. now resolves sinceSeconds.
func ParseLogRequest(q url.Values, now time.Time) (LogRequest, error) {
	var lr LogRequest
	var err error
	if lr.Options.Follow, err = boolParam(q, "follow"); err != nil {
		return lr, err
	}
	if lr.Previous, err = boolParam(q, "previous"); err != nil {
		return lr, err
	}
	if lr.Options.Timestamp, err = boolParam(q, "timestamps"); err != nil {
		return lr, err
	}
	if lr.Options.TailLines, err = intParam(q, "tailLines", 0); err != nil {
		return lr, err
	}
	if lr.Options.LimitBytes, err = intParam(q, "limitBytes", 1); err != nil {
		return lr, err
	}
	since, err := intParam(q, "sinceSeconds", 1)
	if err != nil {
		return lr, err
	}
	if q.Get("sinceTime") != "" {
		if since != nil {
			return lr, badRequest("at most one of sinceTime or sinceSeconds may be given")
		}
		t, err := time.Parse(time.RFC3339, q.Get("sinceTime"))
		if err != nil {
			return lr, badRequest("sinceTime %q is not an RFC 3339 time", q.Get("sinceTime"))
		}
		lr.Options.Since = t
	}
	if since != nil {
		lr.Options.Since = now.Add(-time.Duration(*since) * time.Second)
	}
	return lr, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s=%q is not a boolean", name, v)
	}
	return b, nil
}

func intParam(q url.Values, name string, least int64) (*int64, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, badRequest("%s=%q is not an integer", name, v)
	}
	if n < least {
		return nil, badRequest("%s must be at least %d", name, least)
	}
	return &n, nil
}

// LogContainer picks, among the runtime's containers of one container of
// a pod (all its attempts, as nodelet labelled them), the one whose log a
// request reads: the newest that was started (running, or exited and not
// restarted yet), or with previous the one before it; as the kubelet does,
// previous of a container that exited and waits to restart (restarts, by
// its restart policy) is its last run. The pod's status is never read:
// whoever may write it could point it at another pod's container. pod and
// container name the request, for errors.
func LogContainer(found []*runtimeapi.Container, pod, container string, previous, restarts bool) (string, error) {
	var started []*runtimeapi.Container
	waiting := false
	for _, c := range found {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_CREATED {
			waiting = true
			continue
		}
		started = append(started, c)
	}
	// Newest first: by creation, then attempt.
	slices.SortFunc(started, func(a, b *runtimeapi.Container) int {
		if c := cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt()); c != 0 {
			return c
		}
		return cmp.Compare(b.GetMetadata().GetAttempt(), a.GetMetadata().GetAttempt())
	})
	if previous {
		if len(started) > 0 && restarts && started[0].GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return started[0].GetId(), nil
		}
		if len(started) < 2 {
			return "", badRequest("previous terminated container %q in pod %q not found", container, pod)
		}
		return started[1].GetId(), nil
	}
	if len(started) == 0 {
		if waiting {
			return "", badRequest("container %q in pod %q is waiting to start: ContainerCreating", container, pod)
		}
		return "", badRequest("container %q in pod %q is waiting to start", container, pod)
	}
	return started[0].GetId(), nil
}

// logContainerID finds the container whose log a request for container of
// pod reads, among nodelet's own containers of the pod (by UID, which the
// API never changes).
func (s *Server) logContainerID(ctx context.Context, pod *corev1.Pod, container string, previous bool) (string, error) {
	if !hasContainer(pod, container) {
		return "", fmt.Errorf("%w: container %q in pod %q", errNotFound, container, pod.Name)
	}
	found, err := s.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{
			kubetypes.KubernetesPodUIDLabel:        string(pod.UID),
			kubetypes.KubernetesContainerNameLabel: container,
		},
	})
	if err != nil {
		return "", fmt.Errorf("finding container %q of pod %q: %w", container, pod.Name, err)
	}
	// The runtime filters by label already; a runtime that did not must
	// not widen the choice.
	found = slices.DeleteFunc(found, func(c *runtimeapi.Container) bool {
		l := c.GetLabels()
		return l[kubetypes.KubernetesPodUIDLabel] != string(pod.UID) || l[kubetypes.KubernetesContainerNameLabel] != container
	})
	return LogContainer(found, pod.Name, container, previous, restarts(pod, container))
}

// restarts reports whether container of pod is restarted when it exits,
// by the pod's spec (which, unlike its status, only the pod's creator
// writes).
func restarts(pod *corev1.Pod, container string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == ""
		}
	}
	return false
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// flushWriter flushes after every write, so that a followed log reaches the
// client line by line.
type flushWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	wrote   bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.wrote = true
	n, err := f.w.Write(p)
	if f.flusher != nil {
		f.flusher.Flush()
	}
	return n, err
}
