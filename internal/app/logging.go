package app

import (
	"fmt"

	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/options"
)

// setUpLogging sets the process's feature gates from the configuration,
// then its logging as the kubelet's (k8s.io/component-base/logs: format,
// -v, --vmodule), and makes controller-runtime log through klog, so that
// nodelet's messages and those of client-go and the other Kubernetes
// libraries share one format and verbosity. It logs opts' warnings.
func setUpLogging(opts *options.Options) error {
	cfg := opts.Config
	if err := features.Set(cfg.FeatureGates); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	if err := logsapi.ValidateAndApply(&cfg.Logging, features.Gate); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	ctrl.SetLogger(klog.Background())
	log := ctrl.Log.WithName("setup")
	for _, w := range opts.Warnings {
		log.Info("Configuration warning", "warning", w)
	}
	return nil
}
