package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Watchdog tells systemd, as the kubelet does, that nodelet has started
// (READY=1, for a unit of Type=notify) and, when the unit sets
// WatchdogSec (WATCHDOG_USEC in the environment), that it is alive
// (WATCHDOG=1) every half interval while its /healthz checks pass, so that
// systemd restarts a nodelet that hangs. Without NOTIFY_SOCKET it does
// nothing.
type Watchdog struct {
	Health *Health
	Log    logr.Logger

	// notify and interval are systemd's, replaced in tests.
	notify   func(state string) (bool, error)
	interval func() (time.Duration, error)
}

// NewWatchdog returns the Watchdog of health's checks.
func NewWatchdog(health *Health, log logr.Logger) *Watchdog {
	return &Watchdog{
		Health:   health,
		Log:      log,
		notify:   func(state string) (bool, error) { return daemon.SdNotify(false, state) },
		interval: func() (time.Duration, error) { return daemon.SdWatchdogEnabled(false) },
	}
}

// Start notifies READY=1, then pings the watchdog until ctx ends.
func (w *Watchdog) Start(ctx context.Context) error {
	sent, err := w.notify(daemon.SdNotifyReady)
	if err != nil {
		w.Log.Error(err, "Unable to tell systemd nodelet started")
	}
	if !sent {
		return nil // not run by systemd with a notify socket
	}
	interval, err := w.interval()
	if err != nil {
		w.Log.Error(err, "Unable to read the systemd watchdog interval; not pinging it")
		return nil
	}
	if interval <= 0 {
		return nil
	}
	period := interval / 2
	w.Log.Info("Pinging the systemd watchdog", "interval", interval, "period", period)
	wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		if err := w.Health.Check(ctx); err != nil {
			// systemd restarts nodelet once a whole interval passes
			// without a ping.
			w.Log.Error(err, "Health check failed; not pinging the systemd watchdog")
		} else if _, err := w.notify(daemon.SdNotifyWatchdog); err != nil {
			w.Log.Error(err, "Unable to ping the systemd watchdog")
		}
	}, period)
	return nil
}

// Check runs every /healthz check and returns their failures joined.
func (h *Health) Check(ctx context.Context) error {
	h.mu.Lock()
	checks := make(map[string]func(*http.Request) error, len(h.healthz))
	for name, c := range h.healthz {
		checks[name] = c
	}
	h.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/healthz", http.NoBody)
	if err != nil {
		return err
	}
	var errs []error
	for name, c := range checks {
		if err := c(req); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
