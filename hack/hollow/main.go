package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/hollow"
)

type options struct {
	nodes       int
	prefix      string
	kubeconfig  string
	caCert      string
	caKey       string
	rootDir     string
	controllers string
	maxPods     int
	// shared lets every node use the kubeconfig's own credentials when
	// no client CA is given.
	shared bool
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "hollow: %v\n", err)
		os.Exit(1)
	}
}

func parse(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("hollow", flag.ContinueOnError)
	fs.IntVar(&o.nodes, "nodes", 10, "how many hollow nodes to run")
	fs.StringVar(&o.prefix, "prefix", "hollow", "node names are <prefix>-0000, <prefix>-0001, ...")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the API server to join (required)")
	fs.StringVar(&o.caCert, "client-ca-cert", "", "the API server's client CA certificate, to sign each node's own credentials")
	fs.StringVar(&o.caKey, "client-ca-key", "", "the key of --client-ca-cert")
	fs.StringVar(&o.rootDir, "root-dir", "", "where the nodes keep their state (default: a new temporary directory)")
	fs.StringVar(&o.controllers, "controllers", "*", "the reconcilers every node runs, as nodelet's --controllers")
	fs.IntVar(&o.maxPods, "max-pods", 110, "the pods each node admits")
	fs.BoolVar(&o.shared, "shared-credentials", false, "without --client-ca-cert, run every node with the kubeconfig's own credentials: "+
		"every hollow node then acts with the kubeconfig's identity, which the Node authorizer does not restrict")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.kubeconfig == "" {
		return nil, errors.New("--kubeconfig is required")
	}
	if (o.caCert == "") != (o.caKey == "") {
		return nil, errors.New("--client-ca-cert and --client-ca-key go together")
	}
	if o.caCert == "" && !o.shared {
		return nil, errors.New("--client-ca-cert and --client-ca-key are required, for each node to act as system:node:<name>; " +
			"--shared-credentials runs every node with the kubeconfig's own identity instead")
	}
	if o.nodes < 1 {
		return nil, fmt.Errorf("--nodes %d: at least one", o.nodes)
	}
	if o.maxPods < 1 || o.maxPods > math.MaxInt32 {
		return nil, fmt.Errorf("--max-pods %d: out of range", o.maxPods)
	}
	return o, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	ctrl.SetLogger(klog.Background())
	base, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", o.kubeconfig, err)
	}
	var credentials func(string) (*rest.Config, error)
	if o.caCert == "" {
		klog.Warningf("--shared-credentials: every hollow node acts with the identity of %s, which the Node authorizer does not restrict", o.kubeconfig)
		credentials = func(string) (*rest.Config, error) { return rest.CopyConfig(base), nil }
	} else {
		cert, err := os.ReadFile(o.caCert)
		if err != nil {
			return err
		}
		key, err := os.ReadFile(o.caKey)
		if err != nil {
			return err
		}
		signer, err := hollow.NewNodeSigner(base, cert, key)
		if err != nil {
			return err
		}
		credentials = signer.Credentials
	}
	if o.rootDir == "" {
		if o.rootDir, err = os.MkdirTemp("", "nodelet-hollow-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(o.rootDir) }()
	}
	fleet, err := hollow.New(hollow.Options{
		Nodes:       hollow.NodeNames(o.prefix, o.nodes),
		RootDir:     o.rootDir,
		Credentials: credentials,
		Controllers: strings.Split(o.controllers, ","),
		Mutate:      func(c *v1alpha1.NodeletConfiguration) { c.MaxPods = int32(o.maxPods) },
	})
	if err != nil {
		return err
	}
	return fleet.Run(ctrl.SetupSignalHandler())
}
