// Command nodelet is a Kubernetes node agent: it runs the pods bound to one
// node through the CRI and reports them, as a controller-runtime manager.
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/options"
	"github.com/nodelet/nodelet/internal/server"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	zapOpts := zap.Options{}
	opts, err := options.Parse(args, func(fs *pflag.FlagSet) {
		gofs := goflag.NewFlagSet("log", goflag.ContinueOnError)
		zapOpts.BindFlags(gofs)
		fs.AddGoFlagSet(gofs)
	})
	if errors.Is(err, options.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		return 2
	}
	cfg := opts.Config
	// An unknown controller name is a configuration error: say so before
	// anything connects anywhere.
	if _, err := controllers.Default.Resolve(cfg.Controllers); err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	restCfg, err := loadRESTConfig(opts.Kubeconfig)
	if err != nil {
		log.Error(err, "Unable to load the API server configuration")
		return 1
	}
	mgr, err := agent.NewManager(restCfg, cfg)
	if err != nil {
		log.Error(err, "Unable to create the manager")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	deps, err := buildDeps(ctx, cfg)
	if err != nil {
		log.Error(err, "Unable to set up the node's runtime and state")
		return 1
	}
	if err := controllers.Default.Setup(mgr, deps, cfg.Controllers); err != nil {
		log.Error(err, "Unable to set up controllers")
		return 1
	}
	if port := cfg.Server.Port; port == nil || *port != 0 {
		configz, err := agent.ConfigzHandler(cfg)
		if err != nil {
			log.Error(err, "Unable to set up the node API server")
			return 1
		}
		srv, err := server.NewFromConfig(cfg, mgr, deps.Runtime, configz)
		if err != nil {
			log.Error(err, "Unable to set up the node API server")
			return 1
		}
		if err := mgr.Add(srv); err != nil {
			log.Error(err, "Unable to add the node API server")
			return 1
		}
	}
	log.Info("Starting nodelet", "node", cfg.NodeName, "runtime", cfg.ContainerRuntimeEndpoint)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Manager stopped with an error")
		return 1
	}
	return 0
}

// buildDeps connects to the container runtime and opens the state
// directories the reconcilers share.
func buildDeps(ctx context.Context, cfg *v1alpha1.NodeletConfiguration) (*controllers.Deps, error) {
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return nil, fmt.Errorf("creating root directory: %w", err)
	}
	store, err := checkpoint.NewFileStore(filepath.Join(cfg.RootDir, "checkpoints"))
	if err != nil {
		return nil, fmt.Errorf("opening checkpoint store: %w", err)
	}
	runtime, err := cri.Dial(ctx, cfg.ContainerRuntimeEndpoint, cfg.ImageServiceEndpoint, cri.Options{
		NodeName:              cfg.NodeName,
		RuntimeRequestTimeout: cfg.RuntimeRequestTimeout.Duration,
	})
	if err != nil {
		return nil, err
	}
	return &controllers.Deps{Config: cfg, Runtime: runtime, Checkpoints: store}, nil
}

// loadRESTConfig uses --kubeconfig when it is given, else the usual
// in-cluster config or $KUBECONFIG.
func loadRESTConfig(path string) (*rest.Config, error) {
	if path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
		}
		return c, nil
	}
	return ctrl.GetConfig()
}
