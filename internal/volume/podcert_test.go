package volume

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io/fs"
	"math/big"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

func TestBuildPodCertRequest(t *testing.T) {
	tests := []struct {
		name   string
		sa     string
		source v1.PodCertificateProjection
		wantSA string
	}{{
		name:   "default service account, no lifetime",
		source: v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519"},
		wantSA: "default",
	}, {
		name: "named account, lifetime and annotations",
		sa:   "app",
		source: v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ECDSAP256",
			MaxExpirationSeconds: ptr.To[int32](3600), UserAnnotations: map[string]string{"example.com/a": "b"}},
		wantSA: "app",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.ServiceAccountName = tt.sa
			pod.Spec.NodeName = "n1"
			r := buildPodCertRequest(pod, &tt.source, []byte("csr"))
			want := certificatesv1.PodCertificateRequestSpec{
				SignerName: tt.source.SignerName, PodName: "web", PodUID: "uid-1", ServiceAccountName: tt.wantSA,
				NodeName: "n1", MaxExpirationSeconds: tt.source.MaxExpirationSeconds, StubPKCS10Request: []byte("csr"),
				UnverifiedUserAnnotations: tt.source.UserAnnotations,
			}
			if !reflect.DeepEqual(r.Spec, want) {
				t.Errorf("spec = %+v\nwant %+v", r.Spec, want)
			}
			if r.Namespace != "ns" || r.GenerateName != "req-web-" {
				t.Errorf("object = %s / %s, want ns / req-web-", r.Namespace, r.GenerateName)
			}
			if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != "uid-1" {
				t.Errorf("owner = %+v, want the pod", r.OwnerReferences)
			}
		})
	}
}

// testSigner issues certificates from an in-memory CA, as a signer would.
type testSigner struct {
	key   *ecdsa.PrivateKey
	ca    *x509.Certificate
	clock clock.PassiveClock
	// deny, when set, is the reason requests are denied with.
	deny string
}

func newTestSigner(t *testing.T, c clock.PassiveClock) *testSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: c.Now().Add(-time.Hour), NotAfter: c.Now().Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testSigner{key: key, ca: ca, clock: c}
}

func (s *testSigner) sign(r *certificatesv1.PodCertificateRequest) {
	now := s.clock.Now()
	if s.deny != "" {
		r.Status.Conditions = []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue, Reason: s.deny, Message: "not for you"}}
		return
	}
	csr, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil || csr.CheckSignature() != nil {
		r.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "BadCSR"}}
		return
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: r.Spec.PodName},
		NotBefore: now, NotAfter: now.Add(2 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, csr.PublicKey, s.key)
	if err != nil {
		panic(err)
	}
	r.Status.CertificateChain = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ca.Raw}))
	r.Status.NotBefore, r.Status.NotAfter = ptr.To(metav1.NewTime(now)), ptr.To(metav1.NewTime(now.Add(2*time.Hour)))
	r.Status.BeginRefreshAt = ptr.To(metav1.NewTime(now.Add(time.Hour)))
	r.Status.Conditions = []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "Issued"}}
}

// parseCredential splits a bundle into its key and certificates and checks
// that the key is the leaf's.
func parseCredential(t *testing.T, bundle string) (crypto.PrivateKey, []*x509.Certificate) {
	t.Helper()
	var key crypto.PrivateKey
	var certs []*x509.Certificate
	rest := []byte(bundle)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "PRIVATE KEY":
			if key != nil || certs != nil {
				t.Fatal("the key is not the first and only key of the bundle")
			}
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			key = k
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			certs = append(certs, c)
		default:
			t.Fatalf("unexpected %s block", b.Type)
		}
	}
	if key == nil || len(certs) == 0 {
		t.Fatalf("bundle has key %v and %d certificates", key != nil, len(certs))
	}
	pub := key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool })
	if !pub.Equal(certs[0].PublicKey) {
		t.Error("the key is not the leaf certificate's")
	}
	return key, certs
}

func podCertVolume(s v1.PodCertificateProjection, mode *int32) v1.Volume {
	return v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: mode, Sources: []v1.VolumeProjection{{PodCertificate: &s}}}}}
}

func TestSetUpPodCertificate(t *testing.T) {
	tests := []struct {
		keyType string
		mode    *int32
		want    fs.FileMode
	}{
		{"ECDSAP256", nil, 0o644},
		{"ECDSAP384", ptr.To[int32](0o600), 0o600},
		{"ECDSAP521", nil, 0o644},
		{"ED25519", ptr.To[int32](0o440), 0o440},
		{"RSA3072", nil, 0o644},
		{"RSA4096", nil, 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.keyType, func(t *testing.T) {
			e := newTestEnv(t)
			signer := newTestSigner(t, e.clock)
			e.f.sign = signer.sign
			pod := testPod(podCertVolume(v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: tt.keyType,
				CredentialBundlePath: "bundle.pem", KeyPath: "k/key.pem", CertificateChainPath: "k/chain.pem"}, tt.mode))
			if err := e.m.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			dir := e.m.volumeDir(pod.UID, projectedPlugin, "creds")
			bundle := readFile(t, filepath.Join(dir, "bundle.pem"))
			_, certs := parseCredential(t, bundle)
			if len(certs) != 2 || certs[0].Subject.CommonName != "web" || !certs[1].Equal(signer.ca) {
				t.Errorf("chain = %d certificates, leaf %q; want the leaf for web and the CA", len(certs), certs[0].Subject.CommonName)
			}
			key, chain := readFile(t, filepath.Join(dir, "k/key.pem")), readFile(t, filepath.Join(dir, "k/chain.pem"))
			if key+chain != bundle {
				t.Error("the key and chain files are not the bundle's parts")
			}
			for _, f := range []string{"bundle.pem", "k/key.pem", "k/chain.pem"} {
				assertMode(t, filepath.Join(dir, f), tt.want)
			}
			if len(e.f.pcrList) != 1 {
				t.Errorf("%d requests, want 1", len(e.f.pcrList))
			}
			// A second set-up writes the same credential without asking again.
			if err := e.m.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if readFile(t, filepath.Join(dir, "bundle.pem")) != bundle || len(e.f.pcrList) != 1 {
				t.Error("a second set-up changed the credential or asked again")
			}
		})
	}
}

func TestSetUpPodCertificateDeniedAndPending(t *testing.T) {
	e := newTestEnv(t)
	e.m.podCertWait = 300 * time.Millisecond
	signer := newTestSigner(t, e.clock)
	pod := testPod(podCertVolume(v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "b.pem"}, nil))
	ctx := context.Background()

	err := e.m.SetUp(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), "credential bundle is not issued yet") {
		t.Fatalf("pending: %v", err)
	}
	// The signer answers the request in flight: the next set-up writes it.
	e.f.mu.Lock()
	signer.sign(e.f.pcrList[0])
	e.f.mu.Unlock()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(e.f.pcrList) != 1 {
		t.Errorf("%d requests, want 1", len(e.f.pcrList))
	}

	denied := testPod(podCertVolume(v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "b.pem"}, nil))
	denied.UID = "uid-2"
	signer.deny = "NotAllowed"
	e.f.sign = signer.sign
	want := `MountVolume.SetUp failed for volume "creds" : PodCertificateRequest was permanently denied: reason="NotAllowed" message="not for you"`
	for range 2 {
		if err := e.m.SetUp(ctx, denied); err == nil || err.Error() != want {
			t.Fatalf("denied: %v, want %s", err, want)
		}
	}
	if len(e.f.pcrList) != 2 {
		t.Errorf("%d requests, want 2: a denied request is not asked again", len(e.f.pcrList))
	}
}

func TestRefreshPodCertificate(t *testing.T) {
	e := newTestEnv(t)
	signer := newTestSigner(t, e.clock)
	e.f.sign = signer.sign
	pod := testPod(podCertVolume(v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "b.pem"}, nil))
	ctx := context.Background()
	if err := e.m.SetUp(ctx, pod); err != nil {
		t.Fatal(err)
	}
	next, ok := e.m.NextRefresh(pod.UID)
	if !ok || !next.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("NextRefresh = %v, %v; want beginRefreshAt, an hour on", next, ok)
	}
	path := filepath.Join(e.m.volumeDir(pod.UID, projectedPlugin, "creds"), "b.pem")
	first := readFile(t, path)
	if err := e.m.Refresh(ctx, pod); err != nil || readFile(t, path) != first {
		t.Fatalf("a refresh before beginRefreshAt changed the credential (%v)", err)
	}
	// Due, but the signer has not answered yet: the files keep the
	// current credential and the request is read again later.
	e.f.sign = nil
	e.clock.Step(time.Hour)
	if err := e.m.Refresh(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if readFile(t, path) != first {
		t.Error("a refresh still in flight changed the credential")
	}
	if next, ok := e.m.NextRefresh(pod.UID); !ok || !next.Equal(e.clock.Now().Add(certRetryWait)) {
		t.Errorf("NextRefresh with a refresh in flight = %v, %v; want %v", next, ok, e.clock.Now().Add(certRetryWait))
	}
	e.f.mu.Lock()
	signer.sign(e.f.pcrList[1])
	e.f.mu.Unlock()
	e.clock.Step(certRetryWait)
	if err := e.m.Refresh(ctx, pod); err != nil {
		t.Fatal(err)
	}
	second := readFile(t, path)
	k1, _ := parseCredential(t, first)
	k2, _ := parseCredential(t, second)
	if k1.(interface{ Equal(crypto.PrivateKey) bool }).Equal(k2) {
		t.Error("the refresh kept the key")
	}
	if len(e.f.pcrList) != 2 {
		t.Errorf("%d requests, want 2", len(e.f.pcrList))
	}
	if err := e.m.TearDown(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.m.NextRefresh(pod.UID); ok {
		t.Error("a torn-down pod still has a refresh")
	}
}

func TestSetUpPodCertificateGateOff(t *testing.T) {
	e := newTestEnv(t, WithPodCertificates(false))
	pod := testPod(podCertVolume(v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "b.pem"}, nil))
	if err := e.m.SetUp(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "PodCertificateRequest feature gate") {
		t.Fatalf("SetUp = %v, want the gate's error", err)
	}
}
