package certificates

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/certificate"
)

func TestLoadErrorsNameTheInput(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{
			"unreadable bootstrap kubeconfig",
			Options{Kubeconfig: filepath.Join(dir, "kubeconfig"), BootstrapKubeconfig: filepath.Join(dir, "missing"), CertDir: filepath.Join(dir, "pki"), NodeName: "n"},
			"--bootstrap-kubeconfig " + filepath.Join(dir, "missing"),
		},
		{
			"bootstrap without kubeconfig",
			Options{BootstrapKubeconfig: filepath.Join(dir, "b"), CertDir: filepath.Join(dir, "pki"), NodeName: "n"},
			"--bootstrap-kubeconfig needs --kubeconfig",
		},
		{
			"missing kubeconfig without bootstrap",
			Options{Kubeconfig: filepath.Join(dir, "nope"), CertDir: filepath.Join(dir, "pki"), NodeName: "n"},
			"loading --kubeconfig",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = logr.Discard()
			_, err := Load(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestJoinedNodeNeedsNoBootstrapKubeconfig starts on a kubeconfig with a
// valid certificate after the bootstrap kubeconfig was removed.
func TestJoinedNodeNeedsNoBootstrapKubeconfig(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := testPair(t, "system:node:n", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	pair := filepath.Join(dir, "pair.pem")
	if err := os.WriteFile(pair, append(certPEM, keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cluster := &rest.Config{Host: "https://127.0.0.1:1"}
	if err := writeKubeconfig(kubeconfig, nodeKubeconfig(cluster, pair, pair)); err != nil {
		t.Fatal(err)
	}
	for _, rotate := range []bool{false, true} {
		c, err := Load(context.Background(), Options{
			Kubeconfig: kubeconfig, BootstrapKubeconfig: filepath.Join(dir, "removed"),
			CertDir: filepath.Join(dir, "pki"), NodeName: "n", Rotate: rotate, Logger: logr.Discard(),
		})
		if err != nil {
			t.Fatalf("rotate=%v: %v", rotate, err)
		}
		if c.Config.Host != cluster.Host {
			t.Errorf("rotate=%v: host %q", rotate, c.Config.Host)
		}
	}
}

// TestRequestClientCert runs the bootstrap request against a fake API
// whose signer answers at creation, and checks what nodelet asks for and
// how it reports the answer.
func TestRequestClientCert(t *testing.T) {
	issued, _ := testPair(t, "system:node:n", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	cases := []struct {
		name    string
		answer  func(*certificatesv1.CertificateSigningRequest)
		wantErr string
	}{
		{"issued", func(csr *certificatesv1.CertificateSigningRequest) {
			csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: "True"}}
			csr.Status.Certificate = issued
		}, ""},
		{"denied", func(csr *certificatesv1.CertificateSigningRequest) {
			csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.CertificateDenied, Status: "True", Reason: "NotOurNode", Message: "no such machine",
			}}
		}, "denied, reason: NotOurNode, message: no such machine"},
		{"failed", func(csr *certificatesv1.CertificateSigningRequest) {
			csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.CertificateFailed, Status: "True", Reason: "SignerExpired",
			}}
		}, "failed, reason: SignerExpired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var created *certificatesv1.CertificateSigningRequest
			client.PrependReactor("create", "certificatesigningrequests", func(a clienttesting.Action) (bool, runtime.Object, error) {
				csr := a.(clienttesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
				created = csr.DeepCopy()
				tc.answer(csr) // stored with the answer by the next reactor
				return false, nil, nil
			})
			opts := &Options{CertDir: t.TempDir(), NodeName: "n", Logger: logr.Discard()}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			certPEM, keyPEM, err := requestClientCert(ctx, opts, client)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") {
					t.Fatal("the error holds the key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(certPEM, issued) || len(keyPEM) == 0 {
				t.Fatal("the issued certificate or the key is not returned")
			}
			checkNodeCSR(t, created)
			if _, err := os.Stat(filepath.Join(opts.CertDir, pendingKeyFile)); err != nil {
				t.Errorf("the pending key is not kept for a retry: %v", err)
			}
		})
	}
}

func checkNodeCSR(t *testing.T, csr *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	if csr == nil {
		t.Fatal("no CSR was created")
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("signer %q", csr.Spec.SignerName)
	}
	want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if len(csr.Spec.Usages) != len(want) || csr.Spec.Usages[0] != want[0] || csr.Spec.Usages[1] != want[1] {
		t.Errorf("usages %v, want %v", csr.Spec.Usages, want)
	}
	if !strings.HasPrefix(csr.Name, "node-csr-") {
		t.Errorf("name %q", csr.Name)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		t.Fatal("the request is not PEM")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if req.Subject.CommonName != "system:node:n" || len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v", req.Subject)
	}
}

// TestJoinRemovesTheBootstrapKubeconfig completes a join with a
// certificate an earlier run stored: the bootstrap kubeconfig is removed
// once the kubeconfig is written, and kept when it could not be written or
// is the kubeconfig itself.
func TestJoinRemovesTheBootstrapKubeconfig(t *testing.T) {
	cases := []struct {
		name string
		// kubeconfig is the --kubeconfig path under dir; "bootstrap"
		// is --bootstrap-kubeconfig itself.
		kubeconfig   string
		wantErr      bool
		wantRemoved  bool
		wantWritten  bool
		blockWriting bool
	}{
		{name: "joined", kubeconfig: "state/kubeconfig", wantRemoved: true, wantWritten: true},
		{name: "kubeconfig not written", kubeconfig: "state/kubeconfig", blockWriting: true, wantErr: true},
		{name: "bootstrap kubeconfig is the kubeconfig", kubeconfig: "bootstrap", wantWritten: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bootstrap := filepath.Join(dir, "bootstrap")
			if err := os.WriteFile(bootstrap, []byte("bootstrap"), 0o600); err != nil {
				t.Fatal(err)
			}
			kubeconfig := filepath.Join(dir, tc.kubeconfig)
			if tc.blockWriting {
				// The kubeconfig's directory is a file: writing fails.
				if err := os.WriteFile(filepath.Dir(kubeconfig), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			opts := &Options{Kubeconfig: kubeconfig, BootstrapKubeconfig: bootstrap, CertDir: filepath.Join(dir, "pki"), NodeName: "n", Logger: logr.Discard()}
			if err := ensureCertDir(opts.CertDir); err != nil {
				t.Fatal(err)
			}
			store, err := certificate.NewFileStoreWithLogger(opts.Logger, clientPairPrefix, opts.CertDir, opts.CertDir, "", "")
			if err != nil {
				t.Fatal(err)
			}
			certPEM, keyPEM := testPair(t, "system:node:n", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
			if _, err := store.Update(certPEM, keyPEM); err != nil {
				t.Fatal(err)
			}
			err = requestAndStore(context.Background(), opts, store, &rest.Config{Host: "https://127.0.0.1:1"}, "test")
			if (err != nil) != tc.wantErr {
				t.Fatalf("requestAndStore: %v, want an error: %v", err, tc.wantErr)
			}
			if _, err := os.Stat(bootstrap); os.IsNotExist(err) != tc.wantRemoved {
				t.Errorf("bootstrap kubeconfig removed: %v, want %v", os.IsNotExist(err), tc.wantRemoved)
			}
			if usable, reason := kubeconfigUsable(kubeconfig, time.Now()); usable != tc.wantWritten {
				t.Errorf("kubeconfig usable: %v (%s), want %v", usable, reason, tc.wantWritten)
			}
		})
	}
}

// TestLoadDoesNotWaitForTheAPIServer: with only a bootstrap kubeconfig
// naming an API server that does not answer (a node that runs its own
// control plane), Load returns at once a client of that server without
// credentials; Start keeps trying until it is stopped.
func TestLoadDoesNotWaitForTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap-kubelet.conf")
	cluster := &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "abcdef.0123456789abcdef"}
	kc := nodeKubeconfig(cluster, "", "")
	for _, a := range kc.AuthInfos {
		a.ClientCertificate, a.ClientKey, a.Token = "", "", cluster.BearerToken
	}
	if err := writeKubeconfig(bootstrap, kc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	c, err := Load(ctx, Options{
		Kubeconfig: filepath.Join(dir, "kubelet.conf"), BootstrapKubeconfig: bootstrap,
		CertDir: filepath.Join(dir, "pki"), NodeName: "n", Rotate: true, Logger: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Load took %s", d)
	}
	if c.Config.Host != cluster.Host {
		t.Fatalf("host %q, want the bootstrap kubeconfig's %q", c.Config.Host, cluster.Host)
	}
	if c.Config.BearerToken != "" {
		t.Fatal("the node's client carries the bootstrap token")
	}
	if c.Bootstrapped() {
		t.Fatal("bootstrapped before any request")
	}
	// Its requests wait for the certificate instead of going anonymous.
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, cancelReq := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = cs.CoreV1().Nodes().Get(reqCtx, "n", metav1.GetOptions{})
	cancelReq()
	if err == nil || !strings.Contains(err.Error(), "waiting for the bootstrapped client certificate") {
		t.Fatalf("a request before the bootstrap: %v, want it to wait for the certificate", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Start(runCtx) }()
	time.Sleep(1500 * time.Millisecond)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Start after a stop while bootstrapping: %v", err)
	}
	if c.Bootstrapped() {
		t.Fatal("bootstrapped without an API server")
	}
}

func TestAwaitCertificateHoldsRequestsUntilReady(t *testing.T) {
	sent := make(chan *http.Request, 1)
	ready := make(chan struct{})
	rt := awaitCertificate{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent <- r
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}), ready: ready}
	req, err := http.NewRequest(http.MethodGet, "https://api.example/api", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := rt.RoundTrip(req)
		done <- err
	}()
	select {
	case <-sent:
		t.Fatal("a request went out before the certificate")
	case <-time.After(100 * time.Millisecond):
	}
	close(ready)
	if err := <-done; err != nil {
		t.Fatalf("after the certificate: %v", err)
	}
	if r := <-sent; r != req {
		t.Fatal("another request went out")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
