package certificates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"

	"github.com/nodelet/nodelet/internal/metrics"
)

const (
	// rotationCheckPeriod is how often the transport looks for a new
	// client certificate, as often as the kubelet's: a node at rest is not
	// woken every second for a certificate that changes once in months.
	rotationCheckPeriod = 10 * time.Second
	// maxWithoutCertificate is how long nodelet runs without a valid client
	// certificate before it exits, to bootstrap again when it is started
	// next (with a bootstrap kubeconfig).
	maxWithoutCertificate = 5 * time.Minute
	// bootstrapRetryMin and bootstrapRetryMax bound the wait between two
	// bootstrap attempts while the API server does not answer or refuses.
	bootstrapRetryMin = time.Second
	bootstrapRetryMax = 15 * time.Second
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
	// pending is the bootstrap Start does first, and cert what the
	// transport presents after it (nil before); bootstrapped is closed
	// then.
	pending      *pendingBootstrap
	cert         atomic.Pointer[func() *tls.Certificate]
	bootstrapped chan struct{}
	// exitWithout ends Start with an error when there has been no valid
	// certificate for this long; 0 never.
	exitWithout time.Duration
}

// Load returns the client nodelet runs on, at once: it never waits for
// the API server. When a bootstrap is needed (a bootstrap kubeconfig, and
// neither --kubeconfig nor the certificate directory holds a valid client
// certificate), the client's Config already names the API server of the
// bootstrap kubeconfig but presents no certificate until Start has
// bootstrapped one; requests made meanwhile wait for it (or for their
// context's end).
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
		if usable, reason := kubeconfigUsable(opts.Kubeconfig, time.Now()); !usable && !storeHasValid(store) {
			return deferredBootstrap(&opts, store, reason)
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

// storeHasValid reports whether the certificate directory holds a valid
// client certificate (issued to an earlier run that stopped before it
// wrote the kubeconfig).
func storeHasValid(store certificate.FileStore) bool {
	current, err := store.Current()
	if err != nil || current.Leaf == nil {
		return false
	}
	ok, _ := validAt(current.Leaf, time.Now())
	return ok
}

// pendingBootstrap is the bootstrap a client's Start does first.
type pendingBootstrap struct {
	opts         Options
	store        certificate.FileStore
	bootstrapCfg *rest.Config
	reason       string
}

// deferredBootstrap returns a client of the bootstrap kubeconfig's API
// server without credentials; Start bootstraps its certificate, and the
// client's requests wait for it.
func deferredBootstrap(opts *Options, store certificate.FileStore, reason string) (*Client, error) {
	bootstrapCfg, err := loadBootstrapConfig(opts.BootstrapKubeconfig)
	if err != nil {
		return nil, err
	}
	c := &Client{log: opts.Logger, pending: &pendingBootstrap{opts: *opts, store: store, bootstrapCfg: bootstrapCfg, reason: reason},
		bootstrapped: make(chan struct{})}
	c.Config, c.transport, err = newRotatingTransport(rest.AnonymousClientConfig(bootstrapCfg), c.current)
	if err != nil {
		return nil, err
	}
	// Sent anonymously, every informer's first requests were refused and
	// logged as errors until the certificate came.
	c.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return awaitCertificate{next: rt, ready: c.bootstrapped}
	})
	return c, nil
}

// current is the certificate a deferred client presents: none before its
// bootstrap.
func (c *Client) current() *tls.Certificate {
	if f := c.cert.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// Bootstrapped reports whether the client has its credentials: at once for
// a client that needed no bootstrap, after Start's bootstrap otherwise.
func (c *Client) Bootstrapped() bool {
	return c.pending == nil || c.cert.Load() != nil
}

// awaitCertificate holds each request until ready is closed: the client
// has its certificate.
type awaitCertificate struct {
	next  http.RoundTripper
	ready <-chan struct{}
}

func (a awaitCertificate) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-a.ready:
	case <-req.Context().Done():
		return nil, fmt.Errorf("waiting for the bootstrapped client certificate: %w", req.Context().Err())
	}
	return a.next.RoundTrip(req)
}

// WrappedRoundTripper implements utilnet.RoundTripperWrapper.
func (a awaitCertificate) WrappedRoundTripper() http.RoundTripper { return a.next }

// bootstrap requests the client certificate with the bootstrap
// credentials, retrying until it is issued or ctx ends, then makes the
// client present it (rotated from then on when the options say so).
func (c *Client) bootstrap(ctx context.Context) error {
	p := c.pending
	backoff := wait.Backoff{Duration: bootstrapRetryMin, Factor: 2, Cap: bootstrapRetryMax, Steps: math.MaxInt32}
	for {
		err := requestAndStore(ctx, &p.opts, p.store, p.bootstrapCfg, p.reason)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := backoff.Step()
		c.log.Error(err, "Unable to bootstrap the client certificate, retrying", "retryAfter", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
	cfg, err := loadKubeconfig(p.opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading --kubeconfig %s after the bootstrap: %w", p.opts.Kubeconfig, err)
	}
	var current func() *tls.Certificate
	if p.opts.Rotate {
		if c.manager, err = c.newCertManager(ctx, &p.opts, cfg, p.bootstrapCfg); err != nil {
			return err
		}
		current = c.manager.Current
		c.exitWithout = maxWithoutCertificate
	} else {
		certPEM, err := fileOrData(cfg.CertFile, cfg.CertData)
		if err != nil {
			return fmt.Errorf("reading the bootstrapped client certificate: %w", err)
		}
		keyPEM, err := fileOrData(cfg.KeyFile, cfg.KeyData)
		if err != nil {
			return fmt.Errorf("reading the bootstrapped client key: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("loading the bootstrapped client certificate: %w", err)
		}
		current = func() *tls.Certificate { return &pair }
	}
	c.cert.Store(&current)
	// Connections made without a certificate are anonymous: make new ones.
	c.transport.dialer.CloseAll()
	close(c.bootstrapped)
	c.log.Info("Using the bootstrapped client certificate")
	return nil
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
	c := &Client{log: opts.Logger}
	var err error
	c.manager, err = c.newCertManager(ctx, opts, cfg, bootstrapCfg)
	if err != nil {
		return nil, err
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

// newCertManager makes the manager that rotates the client certificate of
// cfg, renewing with the client's own Config while it has a valid
// certificate and with bootstrapCfg (or cfg) when it has none.
func (c *Client) newCertManager(ctx context.Context, opts *Options, cfg, bootstrapCfg *rest.Config) (certificate.Manager, error) {
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
	m, err := certificate.NewManager(&certificate.Config{
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
	return m, nil
}

// Start runs certificate rotation until ctx ends; without rotation it
// returns at once. It returns an error when nodelet has had no valid
// client certificate for too long and a restart can bootstrap a new one.
func (c *Client) Start(ctx context.Context) error {
	if c.pending != nil {
		if err := c.bootstrap(ctx); err != nil || ctx.Err() != nil {
			return err
		}
	}
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
