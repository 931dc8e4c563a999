package certificates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"

	"github.com/nodelet/nodelet/internal/metrics"
)

const (
	// rotationCheckPeriod is how often the transport looks for a new
	// client certificate.
	rotationCheckPeriod = time.Second
	// maxWithoutCertificate is how long nodelet runs without a valid client
	// certificate before it exits, to bootstrap again when it is started
	// next (with a bootstrap kubeconfig).
	maxWithoutCertificate = 5 * time.Minute
)

// Options say where nodelet's credentials for the API server come from.
type Options struct {
	// Kubeconfig is --kubeconfig. With a bootstrap kubeconfig it is
	// written after a bootstrap, and read when it holds a valid client
	// certificate.
	Kubeconfig string
	// BootstrapKubeconfig is --bootstrap-kubeconfig: credentials that may
	// only request a client certificate. Empty: no bootstrap.
	BootstrapKubeconfig string
	// CertDir is --cert-dir, where client certificates are kept.
	CertDir string
	// NodeName is the node; certificates are for system:node:<NodeName>.
	NodeName string
	// Rotate requests a new client certificate before the current one
	// expires, and switches to it without a restart.
	Rotate bool
	// Logger logs bootstrap and rotation; keys and tokens never appear.
	Logger logr.Logger
}

// Client is the identity nodelet runs on: its REST config and, with
// rotation, the certificate manager and transport that keep it fresh. It
// is a manager.Runnable: add it to the manager so that rotation runs and
// stops with it.
type Client struct {
	// Config is the REST config for every client nodelet makes.
	Config *rest.Config

	log       logr.Logger
	manager   certificate.Manager
	transport *rotatingTransport
	// exitWithout ends Start with an error when there has been no valid
	// certificate for this long; 0 never.
	exitWithout time.Duration
}

// Load bootstraps a client certificate when opts asks for it and it is
// needed, then returns the client nodelet runs on. It waits, for as long
// as ctx lets it, until a bootstrap CSR is approved and issued.
func Load(ctx context.Context, opts Options) (*Client, error) {
	if opts.BootstrapKubeconfig != "" && opts.Kubeconfig == "" {
		return nil, errors.New("--bootstrap-kubeconfig needs --kubeconfig: the path the kubeconfig with the issued certificate is written to")
	}
	var bootstrapCfg *rest.Config
	if opts.BootstrapKubeconfig != "" {
		if err := ensureCertDir(opts.CertDir); err != nil {
			return nil, err
		}
		store, err := certificate.NewFileStoreWithLogger(opts.Logger, clientPairPrefix, opts.CertDir, opts.CertDir, "", "")
		if err != nil {
			return nil, fmt.Errorf("opening the client certificate store in %s: %w", opts.CertDir, err)
		}
		if bootstrapCfg, err = bootstrapClientCert(ctx, &opts, store); err != nil {
			return nil, err
		}
	}
	cfg, err := loadKubeconfig(opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %s: %w", opts.Kubeconfig, err)
	}
	if !opts.Rotate {
		return &Client{Config: cfg, log: opts.Logger}, nil
	}
	return newRotatingClient(ctx, &opts, cfg, bootstrapCfg)
}

// newRotatingClient starts a certificate manager for the client
// certificate of cfg and returns a client that uses whichever certificate
// is current. Renewals are requested with the current certificate, or,
// when there is no valid one, with the bootstrap credentials if this run
// bootstrapped (else with cfg's own, expired, credentials, which fail: a
// restart then bootstraps).
func newRotatingClient(ctx context.Context, opts *Options, cfg, bootstrapCfg *rest.Config) (*Client, error) {
	if (cfg.CertFile == "" && len(cfg.CertData) == 0) || (cfg.KeyFile == "" && len(cfg.KeyData) == 0) {
		return nil, errors.New("rotateCertificates needs a client certificate in --kubeconfig, or a --bootstrap-kubeconfig to get one")
	}
	if err := ensureCertDir(opts.CertDir); err != nil {
		return nil, err
	}
	// The kubeconfig's own certificate seeds the store when it is empty
	// (a kubeconfig not written by a bootstrap); it is then rotated at once.
	certPEM, err := fileOrData(cfg.CertFile, cfg.CertData)
	if err != nil {
		return nil, fmt.Errorf("reading the client certificate of --kubeconfig: %w", err)
	}
	keyPEM, err := fileOrData(cfg.KeyFile, cfg.KeyData)
	if err != nil {
		return nil, fmt.Errorf("reading the client key of --kubeconfig: %w", err)
	}
	store, err := certificate.NewFileStoreWithLogger(opts.Logger, clientPairPrefix, opts.CertDir, opts.CertDir, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("opening the client certificate store in %s: %w", opts.CertDir, err)
	}
	c := &Client{log: opts.Logger}
	renewCfg := bootstrapCfg
	if renewCfg == nil {
		renewCfg = cfg
	}
	clientsetFn := func(current *tls.Certificate) (clientset.Interface, error) {
		if current != nil {
			return clientset.NewForConfig(c.Config)
		}
		return clientset.NewForConfig(renewCfg)
	}
	template := &x509.CertificateRequest{Subject: NodeSubject(opts.NodeName)}
	managerCtx := logr.NewContext(ctx, opts.Logger)
	c.manager, err = certificate.NewManager(&certificate.Config{
		ClientsetFn:             clientsetFn,
		Template:                template,
		SignerName:              certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:               certificate.DefaultKubeletClientGetUsages,
		CertificateStore:        store,
		BootstrapCertificatePEM: certPEM,
		BootstrapKeyPEM:         keyPEM,
		Name:                    "client",
		CertificateRenewFailure: metrics.ClientCertificateRenewErrors,
		Ctx:                     &managerCtx,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the client certificate manager: %w", err)
	}
	c.Config, c.transport, err = newRotatingTransport(cfg, c.manager.Current)
	if err != nil {
		return nil, err
	}
	if opts.BootstrapKubeconfig != "" {
		c.exitWithout = maxWithoutCertificate
	}
	return c, nil
}

// Start runs certificate rotation until ctx ends; without rotation it
// returns at once. It returns an error when nodelet has had no valid
// client certificate for too long and a restart can bootstrap a new one.
func (c *Client) Start(ctx context.Context) error {
	if c.manager == nil {
		return nil
	}
	c.manager.Start()
	defer c.manager.Stop()
	c.log.Info("Rotating the client certificate before it expires")
	if err := c.transport.closeOnChange(ctx, c.log, rotationCheckPeriod, c.exitWithout); err != nil {
		return fmt.Errorf("client certificate rotation: %w", err)
	}
	return nil
}
