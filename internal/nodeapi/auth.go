package nodeapi

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/util/flowcontrol"
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

// errTooManyReviews means a token could not be checked because too many
// TokenReviews were asked for lately (429).
var errTooManyReviews = errors.New("too many token reviews")

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
	// FailureCacheTTL is how long a TokenReview that did not authenticate
	// the token is reused, whatever CacheTTL is, so that a client repeating
	// a bad token costs one review; zero means DefaultFailureCacheTTL, a
	// negative value no caching of failures.
	FailureCacheTTL time.Duration
	// ReviewQPS and ReviewBurst bound the TokenReviews of tokens not in the
	// cache (a token bucket); beyond it a request is answered 429 without a
	// review. Zero means DefaultReviewQPS and DefaultReviewBurst.
	ReviewQPS   float32
	ReviewBurst int
	// Anonymous lets requests without credentials through as Anonymous.
	Anonymous bool

	tokens  *cache.LRUExpireCache
	limiter flowcontrol.RateLimiter
	flights *flightGroup
}

// Defaults of the token review guards.
const (
	DefaultFailureCacheTTL = 10 * time.Second
	DefaultReviewQPS       = 10
	DefaultReviewBurst     = 20
)

// tokenReviewTimeout bounds one TokenReview, which may answer several
// requests: it does not end with the request that started it.
const tokenReviewTimeout = 30 * time.Second

// NewAuthenticator returns an Authenticator with its token cache and
// review rate limit.
func NewAuthenticator(a Authenticator) *Authenticator {
	a.tokens = cache.NewLRUExpireCache(4096)
	if a.FailureCacheTTL == 0 {
		a.FailureCacheTTL = DefaultFailureCacheTTL
	}
	if a.ReviewQPS <= 0 {
		a.ReviewQPS = DefaultReviewQPS
	}
	if a.ReviewBurst <= 0 {
		a.ReviewBurst = DefaultReviewBurst
	}
	a.limiter = flowcontrol.NewTokenBucketRateLimiter(a.ReviewQPS, a.ReviewBurst)
	a.flights = &flightGroup{flights: map[string]*flight{}}
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

// tokenUser authenticates a bearer token with a TokenReview, at most one
// at a time per token, reusing answers as the cache TTLs say. The token is
// known only by its SHA-256 in the cache and never logged or returned in an
// error.
func (a *Authenticator) tokenUser(ctx context.Context, token string) (User, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if ans, ok := a.cached(key); ok {
		return ans.result()
	}
	ans, err := a.flights.do(ctx, key, func() (tokenAnswer, error) {
		// A review that just finished may have answered it.
		if ans, ok := a.cached(key); ok {
			return ans, nil
		}
		if !a.limiter.TryAccept() {
			return tokenAnswer{}, errTooManyReviews
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenReviewTimeout)
		defer cancel()
		return a.review(rctx, key, token)
	})
	if err != nil {
		return User{}, err
	}
	return ans.result()
}

func (a *Authenticator) cached(key string) (tokenAnswer, bool) {
	v, ok := a.tokens.Get(key)
	if !ok {
		return tokenAnswer{}, false
	}
	return v.(tokenAnswer), true
}

func (ans tokenAnswer) result() (User, error) {
	if !ans.ok {
		return User{}, errUnauthenticated
	}
	return ans.user, nil
}

// review asks the API server about token and caches the verdict under key.
func (a *Authenticator) review(ctx context.Context, key, token string) (tokenAnswer, error) {
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	if err := a.Reviewer.Create(ctx, review); err != nil {
		// The token is never part of the error.
		return tokenAnswer{}, fmt.Errorf("creating a TokenReview: %w", err)
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
	ttl := a.CacheTTL
	if !ans.ok {
		ttl = a.FailureCacheTTL
	}
	if ttl > 0 {
		a.tokens.Add(key, ans, ttl)
	}
	return ans, nil
}

// flightGroup runs one call per key at a time; callers of a key that is
// in flight wait for its answer instead of making their own.
type flightGroup struct {
	mu      sync.Mutex
	flights map[string]*flight
}

type flight struct {
	done chan struct{}
	ans  tokenAnswer
	err  error
}

func (g *flightGroup) do(ctx context.Context, key string, fn func() (tokenAnswer, error)) (tokenAnswer, error) {
	g.mu.Lock()
	if f, ok := g.flights[key]; ok {
		g.mu.Unlock()
		select {
		case <-f.done:
			return f.ans, f.err
		case <-ctx.Done():
			return tokenAnswer{}, fmt.Errorf("waiting for a TokenReview: %w", ctx.Err())
		}
	}
	f := &flight{done: make(chan struct{})}
	g.flights[key] = f
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.flights, key)
		g.mu.Unlock()
		close(f.done)
	}()
	f.ans, f.err = fn()
	return f.ans, f.err
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
// authorization attributes. A command or a stream (exec, attach,
// portForward, run) is create on nodes/proxy whatever the method: a
// WebSocket upgrade comes as a GET, and a HEAD or an OPTIONS must not
// reach it as a get either.
func RequestAttributes(method, reqPath string) Attributes {
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
	if isStreamingPath(reqPath) {
		return Attributes{Verb: "create", Subresources: []string{"proxy"}}
	}
	under := func(prefix string) bool {
		return reqPath == prefix || strings.HasPrefix(reqPath, prefix+"/")
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

// streamingPrefixes are the first path segments of the endpoints that run
// something in a container.
var streamingPrefixes = []string{"exec", "attach", "portforward", "run"}

// isStreamingPath reports whether p, cleaned and in any case, is under one
// of the streaming endpoints: erring towards create costs nothing, as a
// path the router would not serve as such is not served at all.
func isStreamingPath(p string) bool {
	clean := strings.ToLower(path.Clean("/" + p))
	for _, prefix := range streamingPrefixes {
		if clean == "/"+prefix || strings.HasPrefix(clean, "/"+prefix+"/") {
			return true
		}
	}
	return false
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
