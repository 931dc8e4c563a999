package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Anonymous is the user of requests without credentials when anonymous
// access is enabled.
var Anonymous = User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// errUnauthenticated means the request's credentials were checked and are
// not valid, or it had none and anonymous access is off.
var errUnauthenticated = errors.New("unauthorized")

// Authenticator finds the user of a request.
type Authenticator struct {
	// ClientCAs verify client certificates; nil disables them.
	ClientCAs *x509.CertPool
	// ClientCAsFunc, when set, is asked for the pool on every request
	// instead of ClientCAs, so that a rotated CA bundle is picked up; a nil
	// pool disables certificates.
	ClientCAsFunc func() *x509.CertPool
	// Reviewer creates TokenReviews; nil disables bearer tokens.
	Reviewer client.Client
	// CacheTTL is how long a TokenReview's answer is reused.
	CacheTTL time.Duration
	// Anonymous lets requests without credentials through as Anonymous.
	Anonymous bool

	tokens *cache.LRUExpireCache
}

// NewAuthenticator returns an Authenticator with its token cache.
func NewAuthenticator(a Authenticator) *Authenticator {
	a.tokens = cache.NewLRUExpireCache(4096)
	return &a
}

// Authenticate returns the request's user. It returns errUnauthenticated
// (wrapped) when the credentials are not valid or missing, and another error
// when they could not be checked.
func (a *Authenticator) Authenticate(r *http.Request) (User, error) {
	if cas := a.clientCAs(); r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && cas != nil {
		u, err := a.certificateUser(cas, r.TLS.PeerCertificates)
		if err == nil {
			return u, nil
		}
		// A certificate that does not verify is no identity; a token may
		// still be.
		if _, ok := bearerToken(r); !ok {
			return User{}, err
		}
	}
	if token, ok := bearerToken(r); ok {
		if a.Reviewer == nil {
			return User{}, fmt.Errorf("bearer tokens are not accepted: %w", errUnauthenticated)
		}
		return a.tokenUser(r.Context(), token)
	}
	if a.Anonymous {
		return Anonymous, nil
	}
	return User{}, errUnauthenticated
}

// clientCAs is the pool client certificates are verified against now.
func (a *Authenticator) clientCAs() *x509.CertPool {
	if a.ClientCAsFunc != nil {
		return a.ClientCAsFunc()
	}
	return a.ClientCAs
}

func (a *Authenticator) certificateUser(cas *x509.CertPool, chain []*x509.Certificate) (User, error) {
	opts := x509.VerifyOptions{
		Roots:         cas,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return User{}, fmt.Errorf("verifying client certificate: %w", errors.Join(errUnauthenticated, err))
	}
	subject := chain[0].Subject
	if subject.CommonName == "" {
		return User{}, fmt.Errorf("client certificate has no common name: %w", errUnauthenticated)
	}
	return User{Name: subject.CommonName, Groups: append([]string(nil), subject.Organization...)}, nil
}

type tokenAnswer struct {
	user User
	ok   bool
}

func (a *Authenticator) tokenUser(ctx context.Context, token string) (User, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := a.tokens.Get(key); ok {
		ans := v.(tokenAnswer)
		if !ans.ok {
			return User{}, errUnauthenticated
		}
		return ans.user, nil
	}
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	if err := a.Reviewer.Create(ctx, review); err != nil {
		// The token is never part of the error.
		return User{}, fmt.Errorf("creating a TokenReview: %w", err)
	}
	ans := tokenAnswer{ok: review.Status.Authenticated}
	if ans.ok {
		u := review.Status.User
		ans.user = User{Name: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			ans.user.Extra = map[string][]string{}
			for k, v := range u.Extra {
				ans.user.Extra[k] = v
			}
		}
	}
	if a.CacheTTL > 0 {
		a.tokens.Add(key, ans, a.CacheTTL)
	}
	if !ans.ok {
		return User{}, errUnauthenticated
	}
	return ans.user, nil
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Attributes is what a request asks of the node, in SubjectAccessReview
// terms: verb on nodes/<subresource> named the node.
type Attributes struct {
	Verb string
	// Subresources are tried in order; any allowed one allows the request
	// (the fine-grained one first, then proxy, as the kubelet does).
	Subresources []string
}

// RequestAttributes maps a request's method and path to the kubelet's
// authorization attributes.
func RequestAttributes(method, path string) Attributes {
	verb := "get"
	switch method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	under := func(prefix string) bool {
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}
	var sub []string
	switch {
	case under("/stats"):
		sub = []string{"stats"}
	case under("/metrics"):
		sub = []string{"metrics"}
	case under("/logs"):
		sub = []string{"log"}
	case under("/checkpoint"):
		sub = []string{"checkpoint"}
	case under("/configz"):
		sub = []string{"configz", "proxy"}
	case under("/healthz"):
		sub = []string{"healthz", "proxy"}
	case under("/pods"):
		sub = []string{"pods", "proxy"}
	default:
		sub = []string{"proxy"}
	}
	return Attributes{Verb: verb, Subresources: sub}
}

// Authorizer decides with SubjectAccessReviews, caching the answers.
type Authorizer struct {
	// Reviewer creates SubjectAccessReviews; nil allows everything
	// (AlwaysAllow).
	Reviewer client.Client
	// NodeName is the name of the nodes object asked about.
	NodeName string
	// AllowTTL and DenyTTL are how long answers are reused.
	AllowTTL, DenyTTL time.Duration

	answers *cache.LRUExpireCache
}

// NewAuthorizer returns an Authorizer with its cache.
func NewAuthorizer(a Authorizer) *Authorizer {
	a.answers = cache.NewLRUExpireCache(4096)
	return &a
}

// Authorize reports whether u may do attrs, and the subresource it was
// decided on (the last one tried when denied).
func (a *Authorizer) Authorize(ctx context.Context, u User, attrs Attributes) (bool, string, error) {
	if a.Reviewer == nil {
		return true, attrs.Subresources[0], nil
	}
	var last string
	for _, sub := range attrs.Subresources {
		last = sub
		ok, err := a.allowed(ctx, u, attrs.Verb, sub)
		if err != nil {
			return false, sub, err
		}
		if ok {
			return true, sub, nil
		}
	}
	return false, last, nil
}

func (a *Authorizer) allowed(ctx context.Context, u User, verb, sub string) (bool, error) {
	spec := authzv1.SubjectAccessReviewSpec{
		User:   u.Name,
		UID:    u.UID,
		Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb:        verb,
			Version:     "v1",
			Resource:    "nodes",
			Subresource: sub,
			Name:        a.NodeName,
		},
	}
	if len(u.Extra) > 0 {
		spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			spec.Extra[k] = v
		}
	}
	keyBytes, err := json.Marshal(spec)
	if err != nil {
		return false, fmt.Errorf("encoding a SubjectAccessReview: %w", err)
	}
	key := string(keyBytes)
	if v, ok := a.answers.Get(key); ok {
		return v.(bool), nil
	}
	review := &authzv1.SubjectAccessReview{Spec: spec}
	if err := a.Reviewer.Create(ctx, review); err != nil {
		return false, fmt.Errorf("creating a SubjectAccessReview for %s on nodes/%s: %w", u.Name, sub, err)
	}
	ok := review.Status.Allowed
	ttl := a.DenyTTL
	if ok {
		ttl = a.AllowTTL
	}
	if ttl > 0 {
		a.answers.Add(key, ok, ttl)
	}
	return ok, nil
}
