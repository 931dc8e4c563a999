package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cri-client/pkg/logs"
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

// LogContainerID picks the runtime container whose log a request reads
// from the pod's status, as the kubelet does: the current container
// (running, or terminated and not restarted yet), or with previous the one
// before it. It returns the ID without its runtime prefix.
func LogContainerID(pod *corev1.Pod, container string, previous bool) (string, error) {
	var statuses []corev1.ContainerStatus
	statuses = append(statuses, pod.Status.InitContainerStatuses...)
	statuses = append(statuses, pod.Status.ContainerStatuses...)
	statuses = append(statuses, pod.Status.EphemeralContainerStatuses...)
	for _, s := range statuses {
		if s.Name != container {
			continue
		}
		if previous {
			t := s.LastTerminationState.Terminated
			if t == nil || t.ContainerID == "" {
				return "", badRequest("previous terminated container %q in pod %q not found", container, pod.Name)
			}
			return trimRuntimePrefix(t.ContainerID), nil
		}
		switch {
		case s.State.Running != nil && s.ContainerID != "":
			return trimRuntimePrefix(s.ContainerID), nil
		case s.State.Terminated != nil && s.State.Terminated.ContainerID != "":
			return trimRuntimePrefix(s.State.Terminated.ContainerID), nil
		case s.State.Waiting != nil && s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ContainerID != "":
			// Waiting to restart: its last run is what there is to read.
			return trimRuntimePrefix(s.LastTerminationState.Terminated.ContainerID), nil
		case s.State.Waiting != nil:
			return "", badRequest("container %q in pod %q is waiting to start: %s", container, pod.Name, s.State.Waiting.Reason)
		}
		return "", badRequest("container %q in pod %q is not started yet", container, pod.Name)
	}
	if hasContainer(pod, container) {
		return "", badRequest("container %q in pod %q is waiting to start", container, pod.Name)
	}
	return "", fmt.Errorf("%w: container %q in pod %q", errNotFound, container, pod.Name)
}

func trimRuntimePrefix(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
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
