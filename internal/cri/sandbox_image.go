package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SandboxImage returns the image the runtime runs pod sandboxes with, as
// its verbose status tells it (containerd 1.6's CRI: info "config", field
// sandboxImage), so that image GC never removes it. It returns "" for a
// runtime whose config names none: containerd 2 keeps the sandbox image in
// its image service's configuration (pinned_images.sandbox), which its
// status does not show, and lists the image as pinned instead.
func (c *Client) SandboxImage(ctx context.Context) (_ string, err error) {
	defer func(start time.Time) { observe("status", start, err) }(time.Now())
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	resp, err := c.runtime.Status(ctx, true)
	if err != nil {
		return "", fmt.Errorf("reading the runtime's sandbox image: %w", err)
	}
	return SandboxImageFromInfo(resp.GetInfo())
}

// SandboxImageFromInfo reads the sandbox image from a verbose runtime
// status's info: "" when its config names none.
func SandboxImageFromInfo(info map[string]string) (string, error) {
	var config struct {
		SandboxImage string `json:"sandboxImage"`
	}
	raw, ok := info["config"]
	if !ok {
		return "", errors.New("reading the runtime's sandbox image: its status has no config")
	}
	if err := json.Unmarshal([]byte(raw), &config); err != nil {
		return "", fmt.Errorf("reading the runtime's sandbox image: %w", err)
	}
	return config.SandboxImage, nil
}
