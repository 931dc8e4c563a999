package certificates

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

const (
	// clientPairPrefix names the client certificate files in the
	// certificate directory: nodelet-client-<time>.pem, and the symlink
	// nodelet-client-current.pem to the one in use.
	clientPairPrefix = "nodelet-client"
	// pendingKeyFile holds the key of a bootstrap CSR until its
	// certificate is issued, so that a restart while waiting asks again
	// with the same key, under the same CSR name, instead of piling up
	// CSRs.
	pendingKeyFile = clientPairPrefix + ".key.tmp"
	// bootstrapWaitTimeout bounds the wait for the CSR's approval and
	// certificate, as the kubelet's does.
	bootstrapWaitTimeout = time.Hour
	// nodesGroup is the group of node identities.
	nodesGroup = "system:nodes"
)

// NodeSubject is the subject of node nodeName's client certificate, the
// identity the Node authorizer and NodeRestriction recognize.
func NodeSubject(nodeName string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{nodesGroup}}
}

// bootstrapClientCert gets a client certificate with the bootstrap
// credentials and writes opts.Kubeconfig for it, unless opts.Kubeconfig
// is usable as it is. It returns the bootstrap config when it used it, nil
// when not: a node that has joined runs without its bootstrap kubeconfig,
// which nodelet removes once it has written opts.Kubeconfig.
func bootstrapClientCert(ctx context.Context, opts *Options, store certificate.FileStore) (*rest.Config, error) {
	log := opts.Logger
	now := time.Now()
	usable, reason := kubeconfigUsable(opts.Kubeconfig, now)
	if usable {
		log.V(1).Info("Kubeconfig holds a valid client certificate, not bootstrapping", "kubeconfig", opts.Kubeconfig)
		return nil, nil
	}
	bootstrapCfg, err := loadBootstrapConfig(opts.BootstrapKubeconfig)
	if err != nil {
		return nil, err
	}
	return bootstrapCfg, requestAndStore(ctx, opts, store, bootstrapCfg, reason)
}

// requestAndStore gets a client certificate with bootstrapCfg, stores it
// and writes opts.Kubeconfig for it.
func requestAndStore(ctx context.Context, opts *Options, store certificate.FileStore, bootstrapCfg *rest.Config, reason string) error {
	log := opts.Logger
	now := time.Now()
	log.Info("Bootstrapping a client certificate", "reason", reason, "kubeconfig", opts.Kubeconfig, "bootstrapKubeconfig", opts.BootstrapKubeconfig)
	// A certificate issued to an earlier run that stopped before writing
	// the kubeconfig is as good as a new one.
	if current, err := store.Current(); err == nil && current.Leaf != nil {
		if ok, _ := validAt(current.Leaf, now); ok {
			log.Info("Using the client certificate already in the certificate directory", "path", store.CurrentPath())
			if err := writeJoinedKubeconfig(opts, store, bootstrapCfg); err != nil {
				return err
			}
			removeBootstrapKubeconfig(opts)
			return nil
		}
	}
	client, err := kubernetes.NewForConfig(bootstrapCfg)
	if err != nil {
		return fmt.Errorf("creating the bootstrap client: %w", err)
	}
	certPEM, keyPEM, err := requestClientCert(ctx, opts, client)
	if err != nil {
		return err
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return fmt.Errorf("storing the bootstrapped client certificate: %w", err)
	}
	if err := writeJoinedKubeconfig(opts, store, bootstrapCfg); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(opts.CertDir, pendingKeyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Error(err, "Unable to remove the key of the bootstrap request", "path", filepath.Join(opts.CertDir, pendingKeyFile))
	}
	removeBootstrapKubeconfig(opts)
	return nil
}

// writeJoinedKubeconfig makes the issued certificate in store durable and
// writes opts.Kubeconfig for it (atomically, synced): after it returns
// nil the bootstrap kubeconfig may go.
func writeJoinedKubeconfig(opts *Options, store certificate.FileStore, bootstrapCfg *rest.Config) error {
	log := opts.Logger
	if err := syncFile(store.CurrentPath()); err != nil {
		return fmt.Errorf("syncing the bootstrapped client certificate: %w", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(store.CurrentPath())); err != nil {
		return fmt.Errorf("syncing the certificate directory: %w", err)
	}
	if err := writeKubeconfig(opts.Kubeconfig, nodeKubeconfig(bootstrapCfg, store.CurrentPath(), store.CurrentPath())); err != nil {
		return err
	}
	log.Info("Wrote the kubeconfig for the bootstrapped client certificate", "kubeconfig", opts.Kubeconfig, "certificate", store.CurrentPath())
	return nil
}

// removeBootstrapKubeconfig removes --bootstrap-kubeconfig once the
// kubeconfig of the join is written, unless it is --kubeconfig itself: its
// token has served its purpose (the approver gives a token one
// certificate) and must not stay on the host. Only that file goes, not a
// CA file it names. A removal that fails (a read-only mount) is logged,
// not fatal: nodelet runs on the new kubeconfig either way.
func removeBootstrapKubeconfig(opts *Options) {
	log := opts.Logger
	path := opts.BootstrapKubeconfig
	if path == "" || sameFile(path, opts.Kubeconfig) {
		return
	}
	switch err := os.Remove(path); {
	case err == nil:
		log.Info("Removed the bootstrap kubeconfig, whose token is no longer needed", "bootstrapKubeconfig", path)
	case errors.Is(err, fs.ErrNotExist):
	default:
		log.Error(err, "Unable to remove the bootstrap kubeconfig; remove it from the host, its token is no longer needed", "bootstrapKubeconfig", path)
	}
}

// sameFile reports whether paths a and b are one file, or one path.
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// syncFile fsyncs the file at path (following a symlink).
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return f.Sync()
}

// loadBootstrapConfig reads --bootstrap-kubeconfig; its errors name the
// flag, since that is what the user has to fix.
func loadBootstrapConfig(path string) (*rest.Config, error) {
	cfg, err := loadKubeconfig(path)
	if err != nil {
		return nil, fmt.Errorf("reading --bootstrap-kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// requestClientCert asks for a node client certificate with a CSR made
// with the bootstrap credentials and waits until it is issued.
func requestClientCert(ctx context.Context, opts *Options, client kubernetes.Interface) (certPEM, keyPEM []byte, err error) {
	keyPEM, _, err = keyutil.LoadOrGenerateKeyFile(filepath.Join(opts.CertDir, pendingKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("making the key of the bootstrap request: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the key of the bootstrap request: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("the key of the bootstrap request is a %T, not a signing key", key)
	}
	subject := NodeSubject(opts.NodeName)
	csrPEM, err := certutil.MakeCSR(signer, &subject, nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("making the certificate signing request: %w", err)
	}
	name, err := csrName(signer.Public(), subject)
	if err != nil {
		return nil, nil, err
	}
	usages := certificate.DefaultKubeletClientGetUsages(signer)
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name,
		certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate signing request %s with the bootstrap credentials: %w", name, err)
	}
	opts.Logger.Info("Waiting for the client certificate", "csr", reqName, "signer", certificatesv1.KubeAPIServerClientKubeletSignerName)
	waitCtx, cancel := context.WithTimeout(ctx, bootstrapWaitTimeout)
	defer cancel()
	certPEM, err = csr.WaitForCertificate(waitCtx, client, reqName, reqUID)
	if err != nil {
		return nil, nil, fmt.Errorf("waiting for certificate signing request %s to be approved and issued: %w", reqName, err)
	}
	opts.Logger.Info("Client certificate issued", "csr", reqName)
	return certPEM, keyPEM, nil
}

// csrName names a bootstrap CSR after its public key and subject, so that
// asking again with the same key finds the same CSR.
func csrName(pub crypto.PublicKey, subject pkix.Name) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encoding the public key of the bootstrap request: %w", err)
	}
	h := sha256.New()
	h.Write(der)
	h.Write([]byte(subject.String()))
	return "node-csr-" + hex.EncodeToString(h.Sum(nil))[:40], nil
}
