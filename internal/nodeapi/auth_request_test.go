package nodeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodelet/nodelet/internal/stats/statstest"
	"github.com/nodelet/nodelet/test/utils"
)

// Every row of the mapping from method and path to the kubelet's
// authorization attributes: the verb by method, the subresources by the
// first path segment, a subpath included, a longer name not.
func TestRequestAttributesEveryRow(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		verb         string
		subs         []string
	}{
		// Verbs.
		{http.MethodGet, "/pods", "get", []string{"pods", "proxy"}},
		{http.MethodHead, "/pods", "get", []string{"pods", "proxy"}},
		{http.MethodPost, "/pods", "create", []string{"pods", "proxy"}},
		{http.MethodPut, "/pods", "update", []string{"pods", "proxy"}},
		{http.MethodPatch, "/pods", "patch", []string{"pods", "proxy"}},
		{http.MethodDelete, "/pods", "delete", []string{"pods", "proxy"}},
		{http.MethodOptions, "/pods", "get", []string{"pods", "proxy"}},

		// stats
		{http.MethodGet, "/stats", "get", []string{"stats"}},
		{http.MethodGet, "/stats/", "get", []string{"stats"}},
		{http.MethodGet, "/stats/summary", "get", []string{"stats"}},
		{http.MethodPost, "/stats/summary", "create", []string{"stats"}},
		{http.MethodGet, "/statsz", "get", []string{"proxy"}},
		// metrics
		{http.MethodGet, "/metrics", "get", []string{"metrics"}},
		{http.MethodGet, "/metrics/cadvisor", "get", []string{"metrics"}},
		{http.MethodGet, "/metrics/probes", "get", []string{"metrics"}},
		{http.MethodGet, "/metrics/resource", "get", []string{"metrics"}},
		{http.MethodGet, "/metricsx", "get", []string{"proxy"}},
		// logs: the node's logs; a container's log is proxy.
		{http.MethodGet, "/logs", "get", []string{"log"}},
		{http.MethodGet, "/logs/", "get", []string{"log"}},
		{http.MethodGet, "/logs/messages", "get", []string{"log"}},
		{http.MethodGet, "/logsx", "get", []string{"proxy"}},
		{http.MethodGet, "/containerLogs/ns/p/c", "get", []string{"proxy"}},
		// checkpoint
		{http.MethodPost, "/checkpoint/ns/p/c", "create", []string{"checkpoint"}},
		{http.MethodPost, "/checkpoint", "create", []string{"checkpoint"}},
		{http.MethodPost, "/checkpoints", "create", []string{"proxy"}},
		// configz, healthz and pods: the fine-grained subresource, then proxy.
		{http.MethodGet, "/configz", "get", []string{"configz", "proxy"}},
		{http.MethodGet, "/configz/x", "get", []string{"configz", "proxy"}},
		{http.MethodGet, "/configzz", "get", []string{"proxy"}},
		{http.MethodGet, "/healthz", "get", []string{"healthz", "proxy"}},
		{http.MethodGet, "/healthz/ping", "get", []string{"healthz", "proxy"}},
		{http.MethodGet, "/healthzx", "get", []string{"proxy"}},
		{http.MethodGet, "/pods/", "get", []string{"pods", "proxy"}},
		{http.MethodGet, "/podsx", "get", []string{"proxy"}},
		// Commands and streams are create on proxy whatever the method: a
		// WebSocket upgrade is a GET.
		{http.MethodPost, "/exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/exec/ns/p/uid/c", "create", []string{"proxy"}},
		{http.MethodHead, "/exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodOptions, "/exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodPut, "/exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodPost, "/attach/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/attach/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/portForward/ns/p", "create", []string{"proxy"}},
		{http.MethodHead, "/portForward/ns/p/uid", "create", []string{"proxy"}},
		{http.MethodPost, "/run/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/run/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/exec", "create", []string{"proxy"}},
		{http.MethodGet, "/portforward/ns/p", "create", []string{"proxy"}},
		{http.MethodGet, "//exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/./exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/execs/ns/p/c", "get", []string{"proxy"}},
		{http.MethodGet, "/running", "get", []string{"proxy"}},
		// Everything else is proxy.
		{http.MethodGet, "/", "get", []string{"proxy"}},
		{http.MethodGet, "", "get", []string{"proxy"}},
		{http.MethodGet, "/spec/", "get", []string{"proxy"}},
		// Matched on the path as sent (the mux redirects unclean paths),
		// but a path that cleans to a stream is create.
		{http.MethodGet, "/stats/../exec/ns/p/c", "create", []string{"proxy"}},
		{http.MethodGet, "/stats/../pods", "get", []string{"stats"}},
		{http.MethodGet, "stats", "get", []string{"proxy"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			g := NewWithT(t)
			a := RequestAttributes(tc.method, tc.path)
			g.Expect(a.Verb).To(Equal(tc.verb))
			g.Expect(a.Subresources).To(Equal(tc.subs))
		})
	}
}

// signCert signs a certificate of tmpl's with parent's key (a new key for
// the certificate) and returns it and its key.
func signCert(t *testing.T, tmpl, parent *x509.Certificate, parentKey any) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(time.Hour)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func clientTemplate(cn string, groups ...string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// reviews is a fake API server for TokenReviews and SubjectAccessReviews:
// tokens are the valid bearer tokens, allowed the "user verb subresource"
// triples; it keeps every review asked for and fails while err is set.
type reviews struct {
	mu      sync.Mutex
	tokens  map[string]authnv1.UserInfo
	allowed map[string]bool
	err     error

	tokenReviews int
	sars         []authzv1.SubjectAccessReviewSpec
}

func (rv *reviews) client() client.Client {
	return fakeclient.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			rv.mu.Lock()
			defer rv.mu.Unlock()
			switch r := obj.(type) {
			case *authnv1.TokenReview:
				rv.tokenReviews++
				if rv.err != nil {
					return rv.err
				}
				u, ok := rv.tokens[r.Spec.Token]
				r.Status.Authenticated, r.Status.User = ok, u
			case *authzv1.SubjectAccessReview:
				rv.sars = append(rv.sars, r.Spec)
				if rv.err != nil {
					return rv.err
				}
				a := r.Spec.ResourceAttributes
				r.Status.Allowed = rv.allowed[r.Spec.User+" "+a.Verb+" "+a.Subresource]
			}
			return nil
		},
	}).Build()
}

// asked returns the "verb subresource" of the SubjectAccessReviews since the
// last call, checking that each is about this node.
func (rv *reviews) asked(g Gomega) []string {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	var out []string
	for _, s := range rv.sars {
		a := s.ResourceAttributes
		g.Expect(a.Resource).To(Equal("nodes"))
		g.Expect(a.Version).To(Equal("v1"))
		g.Expect(a.Group).To(BeEmpty())
		g.Expect(a.Name).To(Equal(apiNode))
		g.Expect(s.NonResourceAttributes).To(BeNil())
		out = append(out, a.Verb+" "+a.Subresource)
	}
	rv.sars = nil
	return out
}

func TestAuthenticationFailures(t *testing.T) {
	ca, err := utils.NewCA(t.TempDir(), "clients")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	leaf := func(tmpl *x509.Certificate) []*x509.Certificate {
		c, _ := signCert(t, tmpl, ca.Cert, ca.Key)
		return []*x509.Certificate{c}
	}
	intermediateTmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "intermediate"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	intermediate, intermediateKey := signCert(t, intermediateTmpl, ca.Cert, ca.Key)
	viaIntermediate, _ := signCert(t, clientTemplate("carol", "ops"), intermediate, intermediateKey)
	selfSigned, _ := signCert(t, clientTemplate("mallory", "system:masters"), nil, nil)
	expired := clientTemplate("bob")
	expired.NotBefore, expired.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	serving := clientTemplate("bob")
	serving.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}

	for _, tc := range []struct {
		name      string
		noCAs     bool
		noTokens  bool
		anonymous bool
		certs     []*x509.Certificate
		header    string
		want      User
		wantErr   string // empty: no error; else a part of it
		// unauthenticated is whether the error is errUnauthenticated (401
		// without a log line) rather than a failure to check.
		unauthenticated bool
	}{
		{name: "certificate", certs: leaf(clientTemplate("bob", "ops", "devs")),
			want: User{Name: "bob", Groups: []string{"ops", "devs"}}},
		{name: "certificate through an intermediate", certs: []*x509.Certificate{viaIntermediate, intermediate},
			want: User{Name: "carol", Groups: []string{"ops"}}},
		{name: "certificate without its intermediate", certs: []*x509.Certificate{viaIntermediate},
			wantErr: "verifying client certificate", unauthenticated: true},
		{name: "self-signed certificate", certs: []*x509.Certificate{selfSigned},
			wantErr: "verifying client certificate", unauthenticated: true},
		{name: "expired certificate", certs: leaf(expired), wantErr: "verifying client certificate", unauthenticated: true},
		{name: "serving certificate", certs: leaf(serving), wantErr: "verifying client certificate", unauthenticated: true},
		{name: "certificate without a common name", certs: leaf(clientTemplate("", "ops")),
			wantErr: "client certificate has no common name", unauthenticated: true},
		{name: "certificate, no client CA", noCAs: true, certs: leaf(clientTemplate("bob")),
			wantErr: "unauthorized", unauthenticated: true},
		{name: "certificate, no client CA, anonymous", noCAs: true, anonymous: true, certs: leaf(clientTemplate("bob")),
			want: Anonymous},
		{name: "a valid certificate wins over a token", certs: leaf(clientTemplate("bob")), header: "Bearer good",
			want: User{Name: "bob", Groups: []string{}}},
		{name: "an invalid certificate does not hide a good token", certs: []*x509.Certificate{selfSigned}, header: "Bearer good",
			want: User{Name: "alice", UID: "a-1", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"x"}}}},
		{name: "an invalid certificate and a bad token", certs: []*x509.Certificate{selfSigned}, header: "Bearer bad",
			wantErr: "unauthorized", unauthenticated: true},
		{name: "bearer in lower case", header: "bearer good",
			want: User{Name: "alice", UID: "a-1", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"x"}}}},
		{name: "token with spaces around", header: "Bearer   good  ",
			want: User{Name: "alice", UID: "a-1", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"x"}}}},
		{name: "bad token", header: "Bearer bad", wantErr: "unauthorized", unauthenticated: true},
		{name: "bad token, anonymous", anonymous: true, header: "Bearer bad", wantErr: "unauthorized", unauthenticated: true},
		{name: "basic credentials are not a token", header: "Basic YWxpY2U6cHc=", wantErr: "unauthorized", unauthenticated: true},
		{name: "basic credentials, anonymous", anonymous: true, header: "Basic YWxpY2U6cHc=", want: Anonymous},
		{name: "empty bearer token", header: "Bearer ", wantErr: "unauthorized", unauthenticated: true},
		{name: "bearer without a token", header: "Bearer", wantErr: "unauthorized", unauthenticated: true},
		{name: "token, tokens not accepted", noTokens: true, header: "Bearer good",
			wantErr: "bearer tokens are not accepted", unauthenticated: true},
		{name: "token, tokens not accepted, anonymous", noTokens: true, anonymous: true, header: "Bearer good",
			wantErr: "bearer tokens are not accepted", unauthenticated: true},
		{name: "nothing", wantErr: "unauthorized", unauthenticated: true},
		{name: "nothing, anonymous", anonymous: true, want: Anonymous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rv := &reviews{tokens: map[string]authnv1.UserInfo{"good": {Username: "alice", UID: "a-1", Groups: []string{"devs"},
				Extra: map[string]authnv1.ExtraValue{"scopes": {"x"}}}}}
			a := Authenticator{ClientCAs: pool, Reviewer: rv.client(), CacheTTL: time.Minute, Anonymous: tc.anonymous}
			if tc.noCAs {
				a.ClientCAs = nil
			}
			if tc.noTokens {
				a.Reviewer = nil
			}
			r := httptest.NewRequest(http.MethodGet, "/pods", http.NoBody)
			if tc.certs != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: tc.certs}
			}
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			u, err := NewAuthenticator(a).Authenticate(r)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(errors.Is(err, errUnauthenticated)).To(Equal(tc.unauthenticated))
				g.Expect(u).To(Equal(User{}))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(u.Name).To(Equal(tc.want.Name))
			g.Expect(u.UID).To(Equal(tc.want.UID))
			g.Expect(u.Groups).To(ConsistOf(tc.want.Groups))
			g.Expect(u.Extra).To(Equal(tc.want.Extra))
		})
	}
}

func TestTokenReviewFailuresAreNotCached(t *testing.T) {
	g := NewWithT(t)
	rv := &reviews{tokens: map[string]authnv1.UserInfo{"good": {Username: "alice"}}, err: errors.New("etcd down")}
	a := NewAuthenticator(Authenticator{Reviewer: rv.client(), CacheTTL: time.Minute})
	r := httptest.NewRequest(http.MethodGet, "/pods", http.NoBody)
	r.Header.Set("Authorization", "Bearer good")

	_, err := a.Authenticate(r)
	g.Expect(err).To(MatchError(ContainSubstring("creating a TokenReview: etcd down")))
	g.Expect(errors.Is(err, errUnauthenticated)).To(BeFalse(), "a failure to check is not a verdict")
	g.Expect(err.Error()).NotTo(ContainSubstring("good"), "the token is never in an error")

	rv.err = nil
	u, err := a.Authenticate(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Name).To(Equal("alice"))
	g.Expect(rv.tokenReviews).To(Equal(2))
}

func TestTokenReviewsAreNotCachedWithoutTTL(t *testing.T) {
	g := NewWithT(t)
	rv := &reviews{tokens: map[string]authnv1.UserInfo{"good": {Username: "alice"}}}
	a := NewAuthenticator(Authenticator{Reviewer: rv.client()})
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/pods", http.NoBody)
		r.Header.Set("Authorization", "Bearer good")
		u, err := a.Authenticate(r)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(u.Name).To(Equal("alice"))
	}
	g.Expect(rv.tokenReviews).To(Equal(3))
}

func TestAuthorizerReviews(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	rv := &reviews{allowed: map[string]bool{"alice get stats": true, "bob get proxy": true}}
	a := NewAuthorizer(Authorizer{Reviewer: rv.client(), NodeName: apiNode, AllowTTL: time.Minute})
	alice := User{Name: "alice", UID: "a-1", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"x"}}}

	ok, sub, err := a.Authorize(ctx, alice, RequestAttributes(http.MethodGet, "/stats/summary"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(sub).To(Equal("stats"))
	g.Expect(rv.sars).To(HaveLen(1))
	spec := rv.sars[0]
	g.Expect(spec.User).To(Equal("alice"))
	g.Expect(spec.UID).To(Equal("a-1"))
	g.Expect(spec.Groups).To(Equal([]string{"devs"}))
	g.Expect(spec.Extra).To(Equal(map[string]authzv1.ExtraValue{"scopes": {"x"}}))
	g.Expect(rv.asked(g)).To(Equal([]string{"get stats"}))

	// Denials are not cached without a DenyTTL; allowals are, per user.
	for range 2 {
		ok, sub, err = a.Authorize(ctx, alice, RequestAttributes(http.MethodGet, "/pods"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
		g.Expect(sub).To(Equal("proxy"), "the last one asked")
		ok, _, err = a.Authorize(ctx, alice, RequestAttributes(http.MethodGet, "/stats"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
	}
	g.Expect(rv.asked(g)).To(Equal([]string{"get pods", "get proxy", "get pods", "get proxy"}))
	ok, _, err = a.Authorize(ctx, User{Name: "bob"}, RequestAttributes(http.MethodGet, "/stats"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "alice's answer is not bob's")
	ok, sub, err = a.Authorize(ctx, User{Name: "bob"}, RequestAttributes(http.MethodGet, "/pods"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(sub).To(Equal("proxy"))
	g.Expect(rv.asked(g)).To(Equal([]string{"get stats", "get pods", "get proxy"}))

	// A failed review is an error, not an answer, and is not cached.
	rv.err = errors.New("etcd down")
	ok, sub, err = a.Authorize(ctx, User{Name: "carol"}, RequestAttributes(http.MethodPost, "/exec/ns/p/c"))
	g.Expect(err).To(MatchError(ContainSubstring("creating a SubjectAccessReview for carol on nodes/proxy: etcd down")))
	g.Expect(ok).To(BeFalse())
	g.Expect(sub).To(Equal("proxy"))
	ok, sub, err = a.Authorize(ctx, User{Name: "carol"}, RequestAttributes(http.MethodGet, "/configz"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	g.Expect(sub).To(Equal("configz"), "stops at the first failure")
	g.Expect(rv.asked(g)).To(Equal([]string{"create proxy", "get configz"}))
}

// The node API's guard: who may do what, end to end through the handler.
func TestHandlerAuthenticatesAndAuthorizes(t *testing.T) {
	ca, err := utils.NewCA(t.TempDir(), "clients")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	bobCert, _ := signCert(t, clientTemplate("bob", "ops"), ca.Cert, ca.Key)
	otherCert, _ := signCert(t, clientTemplate("bob", "ops"), nil, nil)

	f := newAPIFixture(t)
	f.opts.Stats = statstest.New(t).Provider
	rv := &reviews{
		tokens: map[string]authnv1.UserInfo{
			"alice-token": {Username: "alice"}, // stats and logs
			"proxy-token": {Username: "proxy"}, // nodes/proxy: everything
			"pods-token":  {Username: "pods"},  // nodes/pods only
		},
		allowed: map[string]bool{
			"alice get stats": true, "alice create stats": true, "alice get log": true,
			"proxy get proxy": true, "proxy create proxy": true,
			"pods get pods":   true,
			"bob get healthz": true,
		},
	}
	f.opts.Authenticator = NewAuthenticator(Authenticator{ClientCAs: pool, Reviewer: rv.client(), CacheTTL: time.Minute})
	f.opts.Authorizer = NewAuthorizer(Authorizer{Reviewer: rv.client(), NodeName: apiNode})

	for _, tc := range []struct {
		name, method, path string
		token              string
		cert               *x509.Certificate
		code               int
		asked              []string
		body               string
	}{
		{name: "no credentials", method: "GET", path: "/healthz", code: http.StatusUnauthorized, body: "Unauthorized"},
		{name: "unknown token", method: "GET", path: "/healthz", token: "nope", code: http.StatusUnauthorized, body: "Unauthorized"},
		{name: "certificate of another CA", method: "GET", path: "/healthz", cert: otherCert, code: http.StatusUnauthorized},
		{name: "certificate", method: "GET", path: "/healthz", cert: bobCert, code: http.StatusOK,
			asked: []string{"get healthz"}, body: "ok"},
		{name: "certificate, not allowed", method: "GET", path: "/pods", cert: bobCert, code: http.StatusForbidden,
			asked: []string{"get pods", "get proxy"},
			body:  "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[pods proxy])"},
		{name: "stats", method: "GET", path: "/stats/summary", token: "alice-token", code: http.StatusOK,
			asked: []string{"get stats"}, body: `"nodeName":"node-a"`},
		{name: "stats by POST", method: "POST", path: "/stats/summary", token: "alice-token", code: http.StatusOK,
			asked: []string{"create stats"}},
		{name: "stats needs nodes/stats, not proxy", method: "GET", path: "/stats/summary", token: "proxy-token",
			code: http.StatusForbidden, asked: []string{"get stats"},
			body: "Forbidden (user=proxy, verb=get, resource=nodes, subresource(s)=[stats])"},
		{name: "a container log needs proxy, not log", method: "GET", path: "/containerLogs/ns/web/app", token: "alice-token",
			code: http.StatusForbidden, asked: []string{"get proxy"}},
		{name: "a container log", method: "GET", path: "/containerLogs/ns/web/app", token: "proxy-token",
			code: http.StatusOK, asked: []string{"get proxy"}, body: "app's second run"},
		{name: "pods with nodes/pods", method: "GET", path: "/pods", token: "pods-token", code: http.StatusOK,
			asked: []string{"get pods"}, body: `"name":"web"`},
		{name: "pods with nodes/proxy", method: "GET", path: "/pods", token: "proxy-token", code: http.StatusOK,
			asked: []string{"get pods", "get proxy"}},
		{name: "exec is create on proxy", method: "POST", path: "/exec/ns/web/app?output=1", token: "pods-token",
			code: http.StatusForbidden, asked: []string{"create proxy"}},
		{name: "exec allowed reaches the handler", method: "POST", path: "/exec/ns/web/app?output=1", token: "proxy-token",
			code: http.StatusBadRequest, asked: []string{"create proxy"}, body: "you must specify a command"},
		{name: "unknown paths are authorized first", method: "GET", path: "/nothing", token: "pods-token",
			code: http.StatusForbidden, asked: []string{"get proxy"}},
		{name: "unknown paths", method: "GET", path: "/nothing", token: "proxy-token",
			code: http.StatusNotFound, asked: []string{"get proxy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := httptest.NewRequest(tc.method, tc.path, http.NoBody)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.cert != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.cert}}
			}
			w := f.serve(r)
			g.Expect(w.Code).To(Equal(tc.code), "body: %s", w.Body.String())
			g.Expect(rv.asked(g)).To(Equal(tc.asked))
			if tc.body != "" {
				g.Expect(w.Body.String()).To(ContainSubstring(tc.body))
			}
		})
	}

	t.Run("the certificate's user is the one asked about", func(t *testing.T) {
		g := NewWithT(t)
		r := httptest.NewRequest(http.MethodGet, "/healthz", http.NoBody)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{bobCert}}
		g.Expect(f.serve(r).Code).To(Equal(http.StatusOK))
		g.Expect(rv.sars).To(HaveLen(1))
		g.Expect(rv.sars[0].User).To(Equal("bob"))
		g.Expect(rv.sars[0].Groups).To(Equal([]string{"ops"}))
		rv.sars = nil
	})

	t.Run("a failed review", func(t *testing.T) {
		g := NewWithT(t)
		rv.err = errors.New("etcd down")
		defer func() { rv.err = nil }()
		r := httptest.NewRequest(http.MethodGet, "/stats/summary", http.NoBody)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{bobCert}}
		w := f.serve(r)
		g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
		g.Expect(w.Body.String()).To(Equal("Authorization error (user=bob, verb=get, resource=nodes, subresource=stats)\n"))
		g.Expect(strings.Contains(w.Body.String(), "etcd")).To(BeFalse(), "the cause is logged, not sent")
		g.Expect(rv.asked(g)).To(Equal([]string{"get stats"}))

		// A failed TokenReview is a 401, as an invalid token is.
		r = httptest.NewRequest(http.MethodGet, "/healthz", http.NoBody)
		r.Header.Set("Authorization", "Bearer never-reviewed")
		w = f.serve(r)
		g.Expect(w.Code).To(Equal(http.StatusUnauthorized))
		g.Expect(rv.asked(g)).To(BeEmpty(), "not authorized without a user")
	})
}
