package certificates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// File names under the serving certificate directory: the self-signed
// pair, as the kubelet names its own under <root>/pki, and the prefix of
// the pairs issued with serverTLSBootstrap (kubelet-server-<time>.pem and
// the symlink kubelet-server-current.pem).
const (
	selfSignedCertName    = "nodelet.crt"
	selfSignedKeyName     = "nodelet.key"
	servingPairPrefix     = "kubelet-server"
	servingDirSettingName = "<rootDir>/pki"
)

// ErrNoServingCertificate is the handshake error while no serving
// certificate has been issued yet (serverTLSBootstrap).
var ErrNoServingCertificate = errors.New("no serving certificate available for the node")

// ServingOptions say where the node API's serving certificate comes from.
type ServingOptions struct {
	// CertFile and KeyFile are server.tlsCertFile and tlsPrivateKeyFile;
	// when set they are served, and read again when they change.
	CertFile, KeyFile string
	// Dir holds the certificates nodelet makes or is issued
	// (<rootDir>/pki).
	Dir string
	// NodeName is the node; Start are the names the certificate is for
	// before the Node reports its addresses.
	NodeName string
	Start    SANs
	// Addresses returns the names the certificate must be for now, and
	// false while the Node has not reported its addresses.
	Addresses func() (SANs, bool)
	// Bootstrap requests the certificate from the cluster
	// (serverTLSBootstrap) with Config, the node's client credentials,
	// instead of making a self-signed one.
	Bootstrap bool
	Config    *rest.Config
	// Logger logs every change of certificate; keys are never logged.
	Logger logr.Logger
}

// Serving is the node API's serving certificate: the files configured,
// read again when they change; or a self-signed pair made again before it
// expires or when the node's addresses change; or, with
// serverTLSBootstrap, a certificate the cluster issues, renewed before it
// expires. GetCertificate serves whichever is current at each handshake.
// It is a manager.Runnable: add it to the manager so that the watching,
// renewal and requests run.
type Serving struct {
	opts   ServingOptions
	period time.Duration
	now    func() time.Time

	// files is set for configured files.
	files *keyPairFiles
	// manager is set with serverTLSBootstrap.
	manager certificate.Manager
	// selfSigned is the self-signed certificate in use otherwise.
	mu         sync.Mutex
	selfSigned atomic.Pointer[tls.Certificate]
}

// NewServing returns the serving certificate opts describe, loaded (or
// made) now; with serverTLSBootstrap it is the one issued before, if any,
// and none until one is issued.
func NewServing(opts ServingOptions) (*Serving, error) {
	s := &Serving{opts: opts, period: ReloadPeriod, now: time.Now}
	if opts.CertFile != "" || opts.KeyFile != "" {
		files, err := newKeyPairFiles(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, err
		}
		s.files = files
		return s, nil
	}
	if err := ensurePrivateDir(opts.Dir, servingDirSettingName); err != nil {
		return nil, err
	}
	if opts.Bootstrap {
		if err := s.newManager(); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := s.checkSelfSigned(opts.Start); err != nil {
		return nil, err
	}
	return s, nil
}

// Current returns the certificate to serve, nil while none was issued.
func (s *Serving) Current() *tls.Certificate {
	switch {
	case s.files != nil:
		return s.files.cert.Load()
	case s.manager != nil:
		return s.manager.Current()
	}
	return s.selfSigned.Load()
}

// GetCertificate is tls.Config.GetCertificate: the current certificate,
// or a failed handshake while there is none, as the kubelet's server
// does while its serving certificate is not issued yet.
func (s *Serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.Current(); c != nil {
		return c, nil
	}
	return nil, ErrNoServingCertificate
}

// Start watches the files, checks the self-signed certificate, or runs
// the certificate manager, until ctx ends.
func (s *Serving) Start(ctx context.Context) error {
	switch {
	case s.files != nil:
		runEvery(ctx, s.period, s.checkFiles)
	case s.manager != nil:
		s.opts.Logger.Info("Requesting the serving certificate from the cluster and renewing it before it expires",
			"signer", certificatesv1.KubeletServingSignerName)
		s.manager.Start()
		<-ctx.Done()
		s.manager.Stop()
	default:
		runEvery(ctx, s.period, func() {
			want, ok := s.opts.Addresses()
			if !ok {
				want = s.opts.Start
			}
			if err := s.checkSelfSigned(want); err != nil {
				s.opts.Logger.Error(err, "Keeping the self-signed serving certificate: making a new one failed")
			}
		})
	}
	return nil
}

// NeedLeaderElection is false: every node serves its own API.
func (s *Serving) NeedLeaderElection() bool { return false }

func (s *Serving) checkFiles() {
	loaded, err := s.files.w.check()
	if err != nil {
		s.opts.Logger.Error(err, "Keeping the previous serving certificate: the changed files do not load", "certFile", s.files.certFile)
		return
	}
	if loaded {
		s.opts.Logger.Info("Loaded the changed serving certificate", "certFile", s.files.certFile,
			"notAfter", s.files.cert.Load().Leaf.NotAfter)
	}
}

// checkSelfSigned loads the self-signed pair when none is in use, and
// makes a new one when there is none or selfSignedRenewal says so.
func (s *Serving) checkSelfSigned(want SANs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	certFile := filepath.Join(s.opts.Dir, selfSignedCertName)
	keyFile := filepath.Join(s.opts.Dir, selfSignedKeyName)
	cur := s.selfSigned.Load()
	if cur == nil {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		switch {
		case err == nil:
			cur = &c
			s.selfSigned.Store(cur)
		case errors.Is(err, fs.ErrNotExist):
		default:
			// A damaged pair is replaced, as a missing one is.
			s.opts.Logger.Error(err, "Replacing the self-signed serving certificate: it does not load", "file", certFile)
		}
	}
	var leaf *x509.Certificate
	if cur != nil {
		leaf = cur.Leaf
	}
	renew, reason := selfSignedRenewal(leaf, s.now(), want)
	if !renew {
		return nil
	}
	c, err := makeSelfSigned(s.opts.NodeName, want, certFile, keyFile)
	if err != nil {
		return err
	}
	s.selfSigned.Store(c)
	s.opts.Logger.Info("Made a self-signed serving certificate", "reason", reason, "file", certFile,
		"dnsNames", c.Leaf.DNSNames, "ips", c.Leaf.IPAddresses, "notAfter", c.Leaf.NotAfter)
	return nil
}

// makeSelfSigned makes a self-signed pair for host and names, writes it
// (key first, each atomically, mode 0600) and returns it.
func makeSelfSigned(host string, names SANs, certFile, keyFile string) (*tls.Certificate, error) {
	var dns []string
	for _, n := range names.DNSNames {
		if n != host {
			dns = append(dns, n)
		}
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, names.IPs, dns)
	if err != nil {
		return nil, fmt.Errorf("generating self-signed serving certificate for %s: %w", host, err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing generated serving certificate: %w", err)
	}
	// The key first: a new certificate beside the old key would not load.
	if err := atomicfile.WriteFile(keyFile, keyPEM, credentialFileMode); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(certFile, certPEM, credentialFileMode); err != nil {
		return nil, err
	}
	return &c, nil
}

// newManager sets up the certificate manager of serverTLSBootstrap: CSRs
// to the signer kubernetes.io/kubelet-serving for system:node:<name> in
// system:nodes and the node's names, made with the node's credentials,
// kept in Dir as kubelet-server-*.pem.
func (s *Serving) newManager() error {
	if s.opts.Config == nil {
		return errors.New("serverTLSBootstrap needs the node's API server credentials")
	}
	store, err := certificate.NewFileStoreWithLogger(s.opts.Logger, servingPairPrefix, s.opts.Dir, s.opts.Dir, "", "")
	if err != nil {
		return fmt.Errorf("opening the serving certificate store in %s: %w", s.opts.Dir, err)
	}
	ctx := logr.NewContext(context.Background(), s.opts.Logger)
	s.manager, err = certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (clientset.Interface, error) {
			return clientset.NewForConfig(s.opts.Config)
		},
		GetTemplate: func() *x509.CertificateRequest {
			names, ok := s.opts.Addresses()
			if !ok {
				return nil
			}
			return servingRequest(s.opts.NodeName, names)
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: store,
		Name:             "server",
		Ctx:              &ctx,
	})
	if err != nil {
		return fmt.Errorf("creating the serving certificate manager: %w", err)
	}
	return nil
}

// servingRequest is the CSR template of the node's serving certificate.
func servingRequest(nodeName string, names SANs) *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject:     NodeSubject(nodeName),
		DNSNames:    names.DNSNames,
		IPAddresses: names.IPs,
	}
}
