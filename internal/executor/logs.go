package executor

import (
	"context"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// ContainerLogs keeps what a container's log has besides its file: its
// link in the log links directory and its rotated files
// (containerlogs.Manager).
type ContainerLogs interface {
	// Link makes the log link of a created container.
	Link(pod, namespace, container, containerID, logPath string) error
	// Forget removes a removed container's links and the rotated files of
	// its log at logPath.
	Forget(containerID, logPath string) error
}

// linkLog makes the log link of a created container. A link that cannot be
// made is logged: it must not fail the container.
func (e *Executor) linkLog(ctx context.Context, pod *v1.Pod, container, id, logDir, logPath string) {
	if e.Logs == nil || logDir == "" || logPath == "" {
		return
	}
	if err := e.Logs.Link(pod.Name, pod.Namespace, container, id, filepath.Join(logDir, logPath)); err != nil {
		log.FromContext(ctx).Error(err, "Unable to make the container's log link", "container", container, "id", id)
	}
}

// forgetLog removes the log link and rotated log files (of logPath, ""
// for none: the pod's log directory goes whole) of a removed container.
// What is left is logged; the periodic sweep removes the link later.
func (e *Executor) forgetLog(ctx context.Context, id, logPath string) {
	if e.Logs == nil {
		return
	}
	if err := e.Logs.Forget(id, logPath); err != nil {
		log.FromContext(ctx).Error(err, "Unable to remove the log link and rotated logs of a removed container", "id", id)
	}
}
