package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodelet/nodelet/test/utils"
)

// reviewer answers TokenReviews (token "good" is alice) and
// SubjectAccessReviews (alice may get nodes/metrics), counting them.
func reviewer(calls *int) client.Client {
	return fakeclient.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			*calls++
			switch r := obj.(type) {
			case *authnv1.TokenReview:
				if r.Spec.Token == "good" {
					r.Status.Authenticated = true
					r.Status.User = authnv1.UserInfo{Username: "alice", Groups: []string{"devs"}}
				}
			case *authzv1.SubjectAccessReview:
				a := r.Spec.ResourceAttributes
				r.Status.Allowed = r.Spec.User == "alice" && a.Resource == "nodes" && a.Subresource == "metrics" && a.Name == "node-a"
			}
			return nil
		},
	}).Build()
}

func TestAuthenticator(t *testing.T) {
	ca, err := utils.NewCA(t.TempDir(), "clients")
	if err != nil {
		t.Fatal(err)
	}
	other, err := utils.NewCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	certOf := func(c *utils.CA, user string, groups ...string) []*x509.Certificate {
		kp, err := c.TLSClientCert(user, groups...)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(kp.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return []*x509.Certificate{leaf}
	}
	var calls int
	for _, tc := range []struct {
		name      string
		anonymous bool
		certs     []*x509.Certificate
		token     string
		wantUser  string
		wantErr   bool
	}{
		{name: "certificate", certs: certOf(ca, "bob", "ops"), wantUser: "bob"},
		{name: "certificate of another CA", certs: certOf(other, "bob"), wantErr: true},
		{name: "good token", token: "good", wantUser: "alice"},
		{name: "bad token", token: "bad", wantErr: true},
		{name: "bad certificate, good token", certs: certOf(other, "bob"), token: "good", wantUser: "alice"},
		{name: "nothing", wantErr: true},
		{name: "nothing, anonymous allowed", anonymous: true, wantUser: "system:anonymous"},
		{name: "bad token, anonymous allowed", anonymous: true, token: "bad", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := NewAuthenticator(Authenticator{ClientCAs: pool, Reviewer: reviewer(&calls), CacheTTL: time.Minute, Anonymous: tc.anonymous})
			r := httptest.NewRequest(http.MethodGet, "/pods", http.NoBody)
			if tc.certs != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: tc.certs}
			}
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			u, err := a.Authenticate(r)
			if tc.wantErr {
				g.Expect(err).To(MatchError(errUnauthenticated))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(u.Name).To(Equal(tc.wantUser))
		})
	}
}

func TestTokenReviewsAreCached(t *testing.T) {
	g := NewWithT(t)
	var calls int
	a := NewAuthenticator(Authenticator{Reviewer: reviewer(&calls), CacheTTL: time.Minute})
	for range 3 {
		for _, token := range []string{"good", "bad"} {
			r := httptest.NewRequest(http.MethodGet, "/pods", http.NoBody)
			r.Header.Set("Authorization", "Bearer "+token)
			_, _ = a.Authenticate(r)
		}
	}
	g.Expect(calls).To(Equal(2), "one review per token")
}

func TestAuthorizer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var calls int
	a := NewAuthorizer(Authorizer{Reviewer: reviewer(&calls), NodeName: "node-a", AllowTTL: time.Minute, DenyTTL: time.Minute})
	alice := User{Name: "alice"}

	ok, _, err := a.Authorize(ctx, alice, RequestAttributes(http.MethodGet, "/metrics/resource"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	ok, sub, err := a.Authorize(ctx, alice, RequestAttributes(http.MethodGet, "/pods"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	g.Expect(sub).To(Equal("proxy"), "pods, then proxy, were asked")
	g.Expect(calls).To(Equal(3))

	for range 3 {
		_, _, _ = a.Authorize(ctx, alice, RequestAttributes(http.MethodGet, "/metrics"))
		_, _, _ = a.Authorize(ctx, alice, RequestAttributes(http.MethodGet, "/pods"))
	}
	g.Expect(calls).To(Equal(3), "answers are cached")

	always := NewAuthorizer(Authorizer{NodeName: "node-a"})
	ok, _, err = always.Authorize(ctx, User{Name: "anyone"}, RequestAttributes(http.MethodPost, "/exec/a/b/c"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
}
