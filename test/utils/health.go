package utils

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// healthWait is how to wait for a process of the harness to be healthy:
// its /healthz, and how to tell that it has exited.
type healthWait struct {
	// name names the process in errors.
	name string
	url  string
	// client makes the requests; nil is http.DefaultClient.
	client *http.Client
	// exited is closed when the process has exited; exitErr says how.
	exited  <-chan struct{}
	exitErr func() error
	// logTail returns the end of the process's log, for errors.
	logTail func(lines int) string
}

// wait polls the URL until it answers 200 or timeout passes, and fails at
// once when the process exits.
func (h healthWait) wait(ctx context.Context, timeout time.Duration) error {
	hc := h.client
	if hc == nil {
		hc = http.DefaultClient
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-h.exited:
			return fmt.Errorf("%s exited during start-up (%w); log:\n%s", h.name, h.exitErr(), h.logTail(40))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, http.NoBody)
		if err != nil {
			return fmt.Errorf("checking %s health: %w", h.name, err)
		}
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("%s did not become healthy in %s; log:\n%s", h.name, timeout, h.logTail(40))
}
