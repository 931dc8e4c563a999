package nodeapi

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CheckpointDirName is where /checkpoint writes its archives, under the
// root directory, as the kubelet's <root-dir>/checkpoints.
const CheckpointDirName = "checkpoints"

// checkpointResponse is /checkpoint's answer: the archive written.
type checkpointResponse struct {
	Items []string `json:"items"`
}

// CheckpointFileName is the archive of a checkpoint of container in the
// pod name in namespace taken at t, as the kubelet names it:
// checkpoint-<pod>_<namespace>-<container>-<RFC 3339 time>.tar.
func CheckpointFileName(namespace, name, container string, t time.Time) string {
	return fmt.Sprintf("checkpoint-%s_%s-%s-%s.tar", name, namespace, container, t.Format(time.RFC3339))
}

// ParseCheckpointTimeout reads /checkpoint's timeout parameter, seconds;
// the last value counts when several are given, none is zero (the
// runtime request timeout).
func ParseCheckpointTimeout(values []string) (time.Duration, error) {
	if len(values) == 0 {
		return 0, nil
	}
	secs, err := strconv.ParseInt(values[len(values)-1], 10, 64)
	if err != nil || secs < 0 || secs > int64(time.Duration(1<<63-1)/time.Second) {
		return 0, errors.New("cannot parse value of timeout parameter")
	}
	return time.Duration(secs) * time.Second, nil
}

// serveCheckpoint answers POST /checkpoint/{namespace}/{pod}/{container}:
// the runtime writes a checkpoint of the running container into the
// checkpoint directory, and the answer names the archive. As the
// kubelet's: 404 for a pod or container the node does not run or a
// timeout that is not a number, 500 when the runtime fails (without CRIU,
// for one).
func (s *Server) serveCheckpoint(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := s.pod(r.Context(), ns, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !hasContainer(pod, container) {
		s.writeError(w, r, fmt.Errorf("%w: container %q in pod %q", errNotFound, container, name))
		return
	}
	timeout, err := ParseCheckpointTimeout(r.URL.Query()["timeout"])
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	failed := func(err error) {
		s.log.Error(err, "Unable to checkpoint a container", "pod", ns+"/"+name, "container", container)
		http.Error(w, fmt.Sprintf("checkpointing of %s/%s/%s failed (%v)", ns, name, container, err), http.StatusInternalServerError)
	}
	id, err := s.runningContainerID(r.Context(), pod, "", container)
	if err != nil {
		failed(err)
		return
	}
	if err := os.MkdirAll(s.opts.CheckpointDir, 0o700); err != nil {
		failed(fmt.Errorf("making the checkpoint directory: %w", err))
		return
	}
	location := filepath.Join(s.opts.CheckpointDir, CheckpointFileName(ns, name, container, s.opts.Clock.Now()))
	if err := s.opts.Runtime.CheckpointContainer(r.Context(), id, location, timeout); err != nil {
		failed(err)
		return
	}
	// The archive holds the container's memory: its owner's alone,
	// whatever mode the runtime made it with.
	if err := os.Chmod(location, 0o600); err != nil {
		failed(fmt.Errorf("restricting the checkpoint archive: %w", err))
		return
	}
	writeJSON(w, checkpointResponse{Items: []string{location}})
}
