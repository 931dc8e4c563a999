package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
)

// ReadLogs implements Runtime. The container must be owned; following asks
// the runtime whether it still runs, as k8s.io/cri-client/pkg/logs does.
func (c *Client) ReadLogs(ctx context.Context, path, containerID string, opts *logs.LogOptions, stdout, stderr io.Writer) error {
	if err := c.checkContainerOwned(ctx, containerID); err != nil {
		return fmt.Errorf("reading log of container %s: %w", containerID, err)
	}
	if err := logs.ReadLogs(ctx, path, containerID, opts, c.runtime, stdout, stderr); err != nil {
		return fmt.Errorf("reading log of container %s: %w", containerID, err)
	}
	return nil
}

// Exec implements Runtime.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (_ *runtimeapi.ExecResponse, err error) {
	defer func(start time.Time) { observe("exec", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, req.GetContainerId()); err != nil {
		return nil, fmt.Errorf("preparing exec in container %s: %w", req.GetContainerId(), err)
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.Exec(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("preparing exec in container %s: %w", req.GetContainerId(), err)
	}
	return resp, nil
}

// Attach implements Runtime.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (_ *runtimeapi.AttachResponse, err error) {
	defer func(start time.Time) { observe("attach", start, err) }(time.Now())
	if err := c.checkContainerOwned(ctx, req.GetContainerId()); err != nil {
		return nil, fmt.Errorf("preparing attach to container %s: %w", req.GetContainerId(), err)
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.Attach(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("preparing attach to container %s: %w", req.GetContainerId(), err)
	}
	return resp, nil
}

// PortForward implements Runtime.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (_ *runtimeapi.PortForwardResponse, err error) {
	defer func(start time.Time) { observe("port_forward", start, err) }(time.Now())
	if _, err := c.ownedSandbox(ctx, req.GetPodSandboxId()); err != nil {
		return nil, fmt.Errorf("preparing port forward to sandbox %s: %w", req.GetPodSandboxId(), err)
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.PortForward(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("preparing port forward to sandbox %s: %w", req.GetPodSandboxId(), err)
	}
	return resp, nil
}

// ListContainerStats implements Runtime.
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) (_ []*runtimeapi.ContainerStats, err error) {
	defer func(start time.Time) { observe("list_container_stats", start, err) }(time.Now())
	f := &runtimeapi.ContainerStatsFilter{}
	if filter != nil {
		f = proto.Clone(filter).(*runtimeapi.ContainerStatsFilter)
	}
	f.LabelSelector = ownerSelector(f.GetLabelSelector(), c.node)
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	all, err := c.runtime.ListContainerStats(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("listing container stats: %w", err)
	}
	out := all[:0:0]
	for _, s := range all {
		if IsOwned(s.GetAttributes().GetLabels(), c.node) {
			out = append(out, s)
		}
	}
	return out, nil
}

// ListPodSandboxStats implements Runtime.
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) (_ []*runtimeapi.PodSandboxStats, err error) {
	defer func(start time.Time) { observe("list_podsandbox_stats", start, err) }(time.Now())
	f := &runtimeapi.PodSandboxStatsFilter{}
	if filter != nil {
		f = proto.Clone(filter).(*runtimeapi.PodSandboxStatsFilter)
	}
	f.LabelSelector = ownerSelector(f.GetLabelSelector(), c.node)
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	all, err := c.runtime.ListPodSandboxStats(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("listing sandbox stats: %w", err)
	}
	out := all[:0:0]
	for _, s := range all {
		if IsOwned(s.GetAttributes().GetLabels(), c.node) {
			out = append(out, s)
		}
	}
	return out, nil
}

// PodSandboxPid implements Runtime. containerd puts the PID in the verbose
// status's info["info"] JSON.
func (c *Client) PodSandboxPid(ctx context.Context, sandboxID string) (_ int, err error) {
	defer func(start time.Time) { observe("podsandbox_status", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.PodSandboxStatus(ctx, sandboxID, true)
	if err != nil {
		return 0, fmt.Errorf("getting verbose status of sandbox %s: %w", sandboxID, err)
	}
	if !IsOwned(resp.GetStatus().GetLabels(), c.node) {
		return 0, fmt.Errorf("getting verbose status of sandbox %s: %w", sandboxID, ErrNotOwned)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if raw := resp.GetInfo()["info"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			return 0, fmt.Errorf("decoding verbose status of sandbox %s: %w", sandboxID, err)
		}
	}
	return info.Pid, nil
}

// ImageFsInfo implements Runtime.
func (c *Client) ImageFsInfo(ctx context.Context) (_ *runtimeapi.ImageFsInfoResponse, err error) {
	defer func(start time.Time) { observe("image_fs_info", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	info, err := c.images.ImageFsInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting image filesystem info: %w", err)
	}
	return info, nil
}
