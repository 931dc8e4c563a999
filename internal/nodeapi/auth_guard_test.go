package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// countingReviewer answers TokenReviews ("good" is alice), counting them;
// with gate set, each review waits for it to close.
type countingReviewer struct {
	calls atomic.Int32
	gate  chan struct{}
	err   error
}

func (c *countingReviewer) client() client.Client {
	return fakeclient.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			c.calls.Add(1)
			if c.gate != nil {
				select {
				case <-c.gate:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if c.err != nil {
				return c.err
			}
			r := obj.(*authnv1.TokenReview)
			if r.Spec.Token == "good" {
				r.Status.Authenticated = true
				r.Status.User = authnv1.UserInfo{Username: "alice"}
			}
			return nil
		},
	}).Build()
}

func tokenRequest(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/pods", http.NoBody)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

func TestFailedTokenReviewsAreCachedBriefly(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cacheTTL   time.Duration
		failureTTL time.Duration
		// reviews after three requests with a bad token, then after the
		// failure TTL passed.
		reviews, reviewsLater int32
	}{
		{name: "default failure TTL, no success cache", reviews: 1, reviewsLater: 1},
		{name: "default failure TTL, with success cache", cacheTTL: time.Minute, reviews: 1, reviewsLater: 1},
		{name: "short failure TTL", failureTTL: 50 * time.Millisecond, reviews: 1, reviewsLater: 2},
		{name: "failures not cached", failureTTL: -1, reviews: 3, reviewsLater: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rv := &countingReviewer{}
			a := NewAuthenticator(Authenticator{Reviewer: rv.client(), CacheTTL: tc.cacheTTL, FailureCacheTTL: tc.failureTTL})
			for range 3 {
				_, err := a.Authenticate(tokenRequest("bad"))
				g.Expect(errors.Is(err, errUnauthenticated)).To(BeTrue(), "got %v", err)
			}
			g.Expect(rv.calls.Load()).To(Equal(tc.reviews))
			time.Sleep(100 * time.Millisecond)
			_, err := a.Authenticate(tokenRequest("bad"))
			g.Expect(errors.Is(err, errUnauthenticated)).To(BeTrue(), "got %v", err)
			g.Expect(rv.calls.Load()).To(Equal(tc.reviewsLater))
		})
	}
}

func TestTokenCacheIsKeyedByAHash(t *testing.T) {
	g := NewWithT(t)
	rv := &countingReviewer{}
	a := NewAuthenticator(Authenticator{Reviewer: rv.client(), CacheTTL: time.Minute})
	for _, token := range []string{"good", "bad-secret-token"} {
		_, _ = a.Authenticate(tokenRequest(token))
	}
	g.Expect(a.tokens.Keys()).To(HaveLen(2))
	for _, key := range a.tokens.Keys() {
		g.Expect(key).To(MatchRegexp(`^[0-9a-f]{64}$`))
		g.Expect(key).NotTo(ContainSubstring("good"))
		g.Expect(key).NotTo(ContainSubstring("secret"))
	}
}

func TestTokenReviewsAreRateLimited(t *testing.T) {
	g := NewWithT(t)
	rv := &countingReviewer{}
	a := NewAuthenticator(Authenticator{Reviewer: rv.client(), ReviewQPS: 0.001, ReviewBurst: 5})
	// Five new tokens are reviewed; the sixth is refused without a review.
	for i := range 5 {
		_, err := a.Authenticate(tokenRequest(fmt.Sprintf("unknown-%d", i)))
		g.Expect(errors.Is(err, errUnauthenticated)).To(BeTrue(), "got %v", err)
	}
	_, err := a.Authenticate(tokenRequest("unknown-5"))
	g.Expect(errors.Is(err, errTooManyReviews)).To(BeTrue(), "got %v", err)
	g.Expect(errors.Is(err, errUnauthenticated)).To(BeFalse())
	g.Expect(rv.calls.Load()).To(Equal(int32(5)))
	// A token whose answer is cached costs no review and is not limited.
	_, err = a.Authenticate(tokenRequest("unknown-0"))
	g.Expect(errors.Is(err, errUnauthenticated)).To(BeTrue(), "got %v", err)
	g.Expect(rv.calls.Load()).To(Equal(int32(5)))
}

func TestRateLimitedTokensGet429WithRetryAfter(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	rv := &countingReviewer{}
	f.opts.Authenticator = NewAuthenticator(Authenticator{Reviewer: rv.client(), ReviewQPS: 0.001, ReviewBurst: 2})
	h := f.server().Handler()
	codes := []int{}
	for i := range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, tokenRequest(fmt.Sprintf("flood-%d", i)))
		codes = append(codes, w.Code)
		if w.Code == http.StatusTooManyRequests {
			g.Expect(w.Header().Get("Retry-After")).To(Equal("1"))
		}
	}
	g.Expect(codes).To(Equal([]int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusTooManyRequests}))
	g.Expect(rv.calls.Load()).To(Equal(int32(2)))
}

func TestConcurrentRequestsWithOneNewTokenCostOneReview(t *testing.T) {
	for _, token := range []string{"good", "bad"} {
		t.Run(token, func(t *testing.T) {
			g := NewWithT(t)
			rv := &countingReviewer{gate: make(chan struct{})}
			a := NewAuthenticator(Authenticator{Reviewer: rv.client(), ReviewQPS: 0.001, ReviewBurst: 1})
			const n = 50
			var wg sync.WaitGroup
			errs := make([]error, n)
			users := make([]User, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					users[i], errs[i] = a.Authenticate(tokenRequest(token))
				}()
			}
			// Let them all arrive while the one review is held.
			g.Eventually(rv.calls.Load).Should(Equal(int32(1)))
			time.Sleep(50 * time.Millisecond)
			close(rv.gate)
			wg.Wait()
			g.Expect(rv.calls.Load()).To(Equal(int32(1)))
			for i := range n {
				if token == "good" {
					g.Expect(errs[i]).NotTo(HaveOccurred())
					g.Expect(users[i].Name).To(Equal("alice"))
				} else {
					g.Expect(errors.Is(errs[i], errUnauthenticated)).To(BeTrue(), "got %v", errs[i])
				}
			}
		})
	}
}

func TestAReviewOutlivesTheRequestThatStartedIt(t *testing.T) {
	g := NewWithT(t)
	rv := &countingReviewer{gate: make(chan struct{})}
	a := NewAuthenticator(Authenticator{Reviewer: rv.client()})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(tokenRequest("good").WithContext(ctx))
		first <- err
	}()
	g.Eventually(rv.calls.Load).Should(Equal(int32(1)))
	second := make(chan User, 1)
	go func() {
		u, _ := a.Authenticate(tokenRequest("good"))
		second <- u
	}()
	cancel() // the first client goes away; the review goes on
	time.Sleep(20 * time.Millisecond)
	close(rv.gate)
	g.Eventually(second).Should(Receive(HaveField("Name", "alice")))
	g.Eventually(first).Should(Receive())
	g.Expect(rv.calls.Load()).To(Equal(int32(1)))
}

func TestReviewErrorsAreNeitherCachedNorTokens(t *testing.T) {
	g := NewWithT(t)
	rv := &countingReviewer{err: errors.New("API server down")}
	a := NewAuthenticator(Authenticator{Reviewer: rv.client(), CacheTTL: time.Minute})
	for range 2 {
		_, err := a.Authenticate(tokenRequest("a-secret-token"))
		g.Expect(err).To(MatchError(ContainSubstring("API server down")))
		g.Expect(errors.Is(err, errUnauthenticated)).To(BeFalse())
		g.Expect(err.Error()).NotTo(ContainSubstring("a-secret-token"))
	}
	g.Expect(rv.calls.Load()).To(Equal(int32(2)))
}

func TestAWaitingRequestThatGoesAwayStopsWaiting(t *testing.T) {
	g := NewWithT(t)
	rv := &countingReviewer{gate: make(chan struct{})}
	defer close(rv.gate)
	a := NewAuthenticator(Authenticator{Reviewer: rv.client()})
	go func() { _, _ = a.Authenticate(tokenRequest("good")) }()
	g.Eventually(rv.calls.Load).Should(Equal(int32(1)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Authenticate(tokenRequest("good").WithContext(ctx))
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(errors.Is(err, errUnauthenticated)).To(BeFalse())
	g.Expect(rv.calls.Load()).To(Equal(int32(1)))
}
