package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// apiPollMin and apiPollMax bound the wait between two looks for the API
// server before the manager starts.
const (
	apiPollMin = 500 * time.Millisecond
	apiPollMax = 5 * time.Second
)

// Run runs the local runnables and the health probes at once, and the
// manager once the API server answers as this node (reachable, and the
// client certificate accepted): a manager started earlier would wait for
// its caches, and could not be stopped while it waits. It returns when ctx
// ends or one of them fails, which stops the other.
func Run(ctx context.Context, local *Local, mgr ctrl.Manager, nodeName string) error {
	if h := HealthOf(mgr); h != nil {
		if err := local.Add(h); err != nil {
			return err
		}
		if err := local.Add(NewWatchdog(h, ctrl.Log.WithName("watchdog"))); err != nil {
			return err
		}
	}
	if Standalone(mgr) {
		return local.Start(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- local.Start(ctx) }()
	go func() {
		if !WaitForAPIServer(ctx, mgr.GetConfig(), nodeName) {
			errs <- nil
			return
		}
		errs <- mgr.Start(ctx)
	}()
	first := <-errs
	cancel()
	return errors.Join(first, <-errs)
}

// WaitForAPIServer waits until the API server answers a read of the Node
// as cfg's user (found, not found or forbidden: it authenticated the
// client), and reports whether it did before ctx ended.
func WaitForAPIServer(ctx context.Context, cfg *rest.Config, nodeName string) bool {
	log := ctrl.Log.WithName("setup")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error(err, "Unable to make a client of the API server")
		<-ctx.Done()
		return false
	}
	backoff := wait.Backoff{Duration: apiPollMin, Factor: 2, Cap: apiPollMax, Steps: math.MaxInt32}
	waiting := false
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cs.CoreV1().Nodes().Get(reqCtx, nodeName, metav1.GetOptions{})
		cancel()
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			if waiting {
				log.Info("API server reached, starting the reconcilers")
			}
			return true
		}
		if !waiting {
			log.Info("Waiting for the API server; static pods run meanwhile", "host", cfg.Host, "reason", fmt.Sprint(err))
			waiting = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff.Step()):
		}
	}
}
