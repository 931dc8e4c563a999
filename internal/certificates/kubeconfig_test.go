package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testPair is a self-signed client certificate valid from notBefore to
// notAfter, and its key, in PEM.
func testPair(t *testing.T, cn string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	return selfSignedPEM(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// selfSignedPEM signs tmpl (given a random serial) with a new P-256 key of
// its own and returns the certificate and the key in PEM.
func selfSignedPEM(t *testing.T, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, big.NewInt(1<<62)); err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func TestCertificateUsable(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	valid, _ := testPair(t, "a", now.Add(-time.Hour), now.Add(time.Hour))
	expired, _ := testPair(t, "a", now.Add(-2*time.Hour), now.Add(-time.Hour))
	future, _ := testPair(t, "a", now.Add(time.Hour), now.Add(2*time.Hour))
	cases := []struct {
		name       string
		pem        []byte
		wantUsable bool
		wantReason string
	}{
		{"valid", valid, true, ""},
		{"expired", expired, false, "expired at 2030-01-01T11:00:00Z"},
		{"not yet valid", future, false, "not valid before 2030-01-01T13:00:00Z"},
		{"chain with an expired certificate", append(append([]byte{}, valid...), expired...), false, "expired"},
		{"not a certificate", []byte("garbage"), false, "cannot be parsed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			usable, reason := certificateUsable(tc.pem, now)
			if usable != tc.wantUsable || !strings.Contains(reason, tc.wantReason) {
				t.Fatalf("got (%v, %q), want (%v, containing %q)", usable, reason, tc.wantUsable, tc.wantReason)
			}
		})
	}
}

func TestKubeconfigUsable(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	validCert, validKey := testPair(t, "system:node:n", now.Add(-time.Hour), now.Add(time.Hour))
	expiredCert, expiredKey := testPair(t, "system:node:n", now.Add(-2*time.Hour), now.Add(-time.Hour))
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pairFile := write("pair.pem", append(append([]byte{}, validCert...), validKey...))
	kubeconfig := func(name string, auth *clientcmdapi.AuthInfo) string {
		t.Helper()
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
		kc.AuthInfos["u"] = auth
		kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		kc.CurrentContext = "x"
		p := filepath.Join(dir, name)
		if err := clientcmd.WriteToFile(*kc, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name       string
		path       string
		wantUsable bool
		wantReason string
	}{
		{"missing", filepath.Join(dir, "nope"), false, "does not exist"},
		{"not a kubeconfig", write("bad", []byte("{{{")), false, "cannot be loaded"},
		{"token only", kubeconfig("token", &clientcmdapi.AuthInfo{Token: "abc.def"}), false, "no client certificate"},
		{"certificate file missing", kubeconfig("gone", &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(dir, "gone.pem"), ClientKey: filepath.Join(dir, "gone.pem")}), false, "unable to read client-cert"},
		{"no key", kubeconfig("nokey", &clientcmdapi.AuthInfo{ClientCertificateData: validCert}), false, "client-key-data or client-key must be specified"},
		{"expired", kubeconfig("expired", &clientcmdapi.AuthInfo{ClientCertificateData: expiredCert, ClientKeyData: expiredKey}), false, "expired"},
		{"valid data", kubeconfig("data", &clientcmdapi.AuthInfo{ClientCertificateData: validCert, ClientKeyData: validKey}), true, ""},
		{"valid pair file", kubeconfig("file", &clientcmdapi.AuthInfo{ClientCertificate: pairFile, ClientKey: pairFile}), true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			usable, reason := kubeconfigUsable(tc.path, now)
			if usable != tc.wantUsable || !strings.Contains(reason, tc.wantReason) {
				t.Fatalf("got (%v, %q), want (%v, containing %q)", usable, reason, tc.wantUsable, tc.wantReason)
			}
		})
	}
}

func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "kubeconfig")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// An older, world-readable file is replaced, not rewritten in place.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := &rest.Config{Host: "https://api.example:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), ServerName: "api"}}
	pair := filepath.Join(dir, "pki", "nodelet-client-current.pem")
	if err := writeKubeconfig(path, nodeKubeconfig(cluster, pair, pair)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, want 0600", fi.Mode().Perm())
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	c, auth := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	if c.Server != cluster.Host || string(c.CertificateAuthorityData) != "ca" || c.TLSServerName != "api" {
		t.Errorf("cluster not kept: %+v", c)
	}
	if auth.ClientCertificate != pair || auth.ClientKey != pair || auth.Token != "" {
		t.Errorf("credentials: %+v, want the pair file %s and no token", auth, pair)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("temporary files left beside the kubeconfig: %v", entries)
	}
}

func TestEnsureCertDir(t *testing.T) {
	cases := []struct {
		name string
		// mode of the directory before, 0 for none.
		mode os.FileMode
		// want is its mode after, wantErr when it is refused.
		want    os.FileMode
		wantErr bool
	}{
		{name: "missing is made 0700", want: 0o700},
		{name: "0700 is kept", mode: 0o700, want: 0o700},
		{name: "0755 is kept", mode: 0o755, want: 0o755},
		{name: "0750 is kept", mode: 0o750, want: 0o750},
		{name: "group-writable is refused", mode: 0o770, want: 0o770, wantErr: true},
		{name: "world-writable is refused", mode: 0o777, want: 0o777, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root", "pki")
			if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
				t.Fatal(err)
			}
			if tc.mode != 0 {
				if err := os.Mkdir(dir, tc.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			err := ensureCertDir(dir)
			if tc.wantErr != (err != nil) {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--cert-dir") {
				t.Errorf("error %q does not name the flag", err)
			}
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.want {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.want)
			}
		})
	}
}

func TestEnsureCertDirRefusesAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ensureCertDir(dir); err == nil {
		t.Error("a file was taken for the certificate directory")
	}
}

func TestCSRName(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	name := func(k *ecdsa.PrivateKey, node string) string {
		n, err := csrName(k.Public(), NodeSubject(node))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if first, again := name(k1, "a"), name(k1, "a"); first != again {
		t.Error("the same key and node give two names: a restart would make a second CSR")
	}
	if name(k1, "a") == name(k2, "a") || name(k1, "a") == name(k1, "b") {
		t.Error("different keys or nodes give the same name")
	}
	if n := name(k1, "a"); !strings.HasPrefix(n, "node-csr-") || len(n) > 253 {
		t.Errorf("name %q", n)
	}
}
