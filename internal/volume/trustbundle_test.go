package volume

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// testCertPEM is a self-signed CA certificate named cn, PEM-encoded.
func testCertPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func bundle(name, signer, pemData string, labels map[string]string) certificatesv1.ClusterTrustBundle {
	return certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pemData},
	}
}

func TestClusterTrustBundleProjection(t *testing.T) {
	a, b, c := testCertPEM(t, "a"), testCertPEM(t, "b"), testCertPEM(t, "c")
	f := &fakeFetcher{bundles: []certificatesv1.ClusterTrustBundle{
		bundle("plain", "", a, nil),
		bundle("example.com:signer:one", "example.com/signer", a+b, map[string]string{"live": "yes"}),
		bundle("example.com:signer:two", "example.com/signer", b+a, map[string]string{"live": "yes"}),
		bundle("example.com:signer:old", "example.com/signer", c, map[string]string{"live": "no"}),
	}}
	m := &Manager{fetcher: f}
	ctx := context.Background()
	project := func(s v1.ClusterTrustBundleProjection) (string, bool, error) {
		s.Path = "ca.crt"
		p, err := m.trustBundlePayload(ctx, &s, 0o644)
		if err != nil {
			return "", false, err
		}
		file, ok := p["ca.crt"]
		return string(file.data), ok, nil
	}
	live := &metav1.LabelSelector{MatchLabels: map[string]string{"live": "yes"}}

	if got, _, err := project(v1.ClusterTrustBundleProjection{Name: ptr.To("plain")}); err != nil || got != a {
		t.Errorf("by name: %q, %v; want the bundle as it is", got, err)
	}
	if _, _, err := project(v1.ClusterTrustBundleProjection{Name: ptr.To("missing")}); err == nil {
		t.Error("a missing bundle: no error")
	}
	if _, ok, err := project(v1.ClusterTrustBundleProjection{Name: ptr.To("missing"), Optional: ptr.To(true)}); err != nil || ok {
		t.Errorf("a missing optional bundle: file %v, %v; want no file, no error", ok, err)
	}

	got, _, err := project(v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/signer"), LabelSelector: live})
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count([]byte(got), []byte("BEGIN CERTIFICATE")); n != 2 {
		t.Errorf("by signer: %d certificates, want a and b once each", n)
	}
	if !bytes.Contains([]byte(got), []byte(a)) || !bytes.Contains([]byte(got), []byte(b)) || bytes.Contains([]byte(got), []byte(c)) {
		t.Error("by signer: want a and b, not the unselected c")
	}
	again, _, _ := project(v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/signer"), LabelSelector: live})
	if again != got {
		t.Error("the merged bundle is not stable")
	}
	all, _, _ := project(v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/signer"), LabelSelector: &metav1.LabelSelector{}})
	if n := bytes.Count([]byte(all), []byte("BEGIN CERTIFICATE")); n != 3 {
		t.Errorf("empty selector: %d certificates, want all 3", n)
	}
	if _, _, err := project(v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/signer")}); err == nil {
		t.Error("no selector matches nothing: want an error for a required source")
	}
	if _, ok, err := project(v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/signer"), Optional: ptr.To(true)}); err != nil || ok {
		t.Errorf("no selector, optional: file %v, %v; want no file", ok, err)
	}
}
