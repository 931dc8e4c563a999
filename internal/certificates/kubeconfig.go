package certificates

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// Modes of what nodelet writes: credentials are readable by their owner
// only, and so is the directory that holds them.
const (
	credentialFileMode = 0o600
	credentialDirMode  = 0o700
)

// loadKubeconfig reads a kubeconfig file into a REST config.
func loadKubeconfig(path string) (*rest.Config, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*kc, kc.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// kubeconfigUsable reports whether the kubeconfig at path can be run on
// as it is: it exists, loads, and holds a client certificate and key that
// are valid at now. When it cannot, reason says why, for the log.
func kubeconfigUsable(path string, now time.Time) (usable bool, reason string) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, "the kubeconfig does not exist"
		}
		return false, fmt.Sprintf("the kubeconfig cannot be read: %v", err)
	}
	cfg, err := loadKubeconfig(path)
	if err != nil {
		return false, fmt.Sprintf("the kubeconfig cannot be loaded: %v", err)
	}
	certPEM, err := fileOrData(cfg.CertFile, cfg.CertData)
	if err != nil {
		return false, fmt.Sprintf("the client certificate cannot be read: %v", err)
	}
	if len(certPEM) == 0 {
		return false, "the kubeconfig has no client certificate"
	}
	keyPEM, err := fileOrData(cfg.KeyFile, cfg.KeyData)
	if err != nil || len(keyPEM) == 0 {
		return false, "the kubeconfig has no readable client key"
	}
	return certificateUsable(certPEM, now)
}

// certificateUsable reports whether every certificate in certPEM is valid
// at now.
func certificateUsable(certPEM []byte, now time.Time) (usable bool, reason string) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return false, fmt.Sprintf("the client certificate cannot be parsed: %v", err)
	}
	for _, c := range certs {
		if ok, reason := validAt(c, now); !ok {
			return false, reason
		}
	}
	return true, ""
}

// validAt reports whether c is valid at now.
func validAt(c *x509.Certificate, now time.Time) (valid bool, reason string) {
	if now.After(c.NotAfter) {
		return false, "the client certificate expired at " + c.NotAfter.UTC().Format(time.RFC3339)
	}
	if now.Before(c.NotBefore) {
		return false, "the client certificate is not valid before " + c.NotBefore.UTC().Format(time.RFC3339)
	}
	return true, ""
}

// fileOrData returns data when it is set, else the content of file, if
// any.
func fileOrData(file string, data []byte) ([]byte, error) {
	if len(data) > 0 || file == "" {
		return data, nil
	}
	return os.ReadFile(file)
}

// nodeKubeconfig is the kubeconfig nodelet runs on after a bootstrap: the
// cluster of the bootstrap config (address, CA, server name) and the
// client certificate and key in the files certFile and keyFile, which
// rotation replaces in place.
func nodeKubeconfig(cluster *rest.Config, certFile, keyFile string) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{
		Server:                   cluster.Host,
		CertificateAuthority:     cluster.CAFile,
		CertificateAuthorityData: cluster.CAData,
		TLSServerName:            cluster.ServerName,
		InsecureSkipTLSVerify:    cluster.Insecure,
	}
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	kc.CurrentContext = "default-context"
	return kc
}

// writeKubeconfig writes kc to path with mode 0600, atomically: a reader
// sees the old file or the new one, never half of one.
func writeKubeconfig(path string, kc *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), credentialDirMode); err != nil {
		return fmt.Errorf("creating the kubeconfig directory: %w", err)
	}
	return atomicfile.WriteFile(path, data, credentialFileMode)
}

// ensureCertDir makes --cert-dir ready for private keys: see
// ensurePrivateDir.
func ensureCertDir(dir string) error {
	return ensurePrivateDir(dir, "--cert-dir")
}

// ensurePrivateDir creates dir with mode 0700 when it is missing. A
// directory that exists keeps its mode: it is the operator's, and nodelet
// changes only what it made. One that group or others may write to is
// refused, since anyone who can write there can replace a key or
// certificate nodelet then trusts; flag names the setting that chose dir,
// for the error.
func ensurePrivateDir(dir, flag string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return fmt.Errorf("creating the parent of the certificate directory %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, credentialDirMode); err == nil {
		// Mkdir applies the umask; what nodelet makes is 0700 whatever it is.
		if err := os.Chmod(dir, credentialDirMode); err != nil {
			return fmt.Errorf("setting the mode of the certificate directory %s: %w", dir, err)
		}
		return nil
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating the certificate directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("reading the certificate directory %s: %w", dir, err)
	}
	return privateDirMode(dir, flag, fi.Mode())
}

// privateDirMode says why an existing certificate directory with mode
// cannot hold keys, or nil when it can: it must be a directory that only
// its owner may write to.
func privateDirMode(dir, flag string, mode fs.FileMode) error {
	if !mode.IsDir() {
		return fmt.Errorf("the certificate directory %s (%s) is not a directory", dir, flag)
	}
	if mode.Perm()&0o022 != 0 {
		return fmt.Errorf("the certificate directory %s (%s) is writable by its group or others (mode %04o): make it 0700, or choose another directory", dir, flag, mode.Perm())
	}
	return nil
}
