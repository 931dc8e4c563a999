package volume

import (
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

const (
	// tokenRefreshFraction is the part of a token's lifetime after which it
	// is replaced, as the kubelet's token manager does.
	tokenRefreshFraction = 0.8
	// tokenMaxAge is the oldest a token gets before it is replaced, however
	// long it was issued for.
	tokenMaxAge = 24 * time.Hour
)

type tokenKey struct {
	audience   string
	expiration int64
}

type cachedToken struct {
	token     string
	refreshAt time.Time
}

// tokenCache keeps the service account tokens of each pod so that SetUp,
// which runs often, asks the API server for a token only when the one it
// has is due for refresh.
type tokenCache struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	pods  map[types.UID]map[tokenKey]cachedToken
}

func newTokenCache(c clock.PassiveClock) *tokenCache {
	return &tokenCache{clock: c, pods: map[types.UID]map[tokenKey]cachedToken{}}
}

// get returns the cached token for (uid, audience, expiration) unless it is
// due for refresh, in which case it calls request and caches the result.
func (c *tokenCache) get(uid types.UID, audience string, expiration int64, request func() (authenticationv1.TokenRequestStatus, error)) (string, error) {
	key := tokenKey{audience: audience, expiration: expiration}
	now := c.clock.Now()
	c.mu.Lock()
	cached, ok := c.pods[uid][key]
	c.mu.Unlock()
	if ok && now.Before(cached.refreshAt) {
		return cached.token, nil
	}
	issued, err := request()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods[uid] == nil {
		c.pods[uid] = map[tokenKey]cachedToken{}
	}
	c.pods[uid][key] = cachedToken{token: issued.Token, refreshAt: tokenRefreshAt(now, expiration, issued.ExpirationTimestamp.Time)}
	return issued.Token, nil
}

// tokenRefreshAt is when a token issued at now is replaced: after 80 % of
// its lifetime or after tokenMaxAge, whichever comes first. The lifetime is
// the shorter of the one requested and the one issued: the API server cuts a
// request down to its maximum, and stretches the default one to a year for
// clients that do not reload their token, which a pod that asked for an hour
// still gets a new token for every hour.
func tokenRefreshAt(now time.Time, requestedSeconds int64, expires time.Time) time.Time {
	lifetime := time.Duration(requestedSeconds) * time.Second
	if !expires.IsZero() {
		lifetime = min(lifetime, expires.Sub(now))
	}
	wait := min(time.Duration(float64(lifetime)*tokenRefreshFraction), tokenMaxAge)
	return now.Add(max(wait, 0))
}

// nextRefresh returns the earliest time a token of uid is due for refresh.
func (c *tokenCache) nextRefresh(uid types.UID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, t := range c.pods[uid] {
		if next.IsZero() || t.refreshAt.Before(next) {
			next = t.refreshAt
		}
	}
	return next, !next.IsZero()
}

func (c *tokenCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

// NextRefresh returns when the earliest service account token or pod
// certificate written for the pod is due for refresh; the caller runs
// Refresh then (for example with RequeueAfter). It reports false when the
// pod has neither.
func (m *Manager) NextRefresh(uid types.UID) (time.Time, bool) {
	next, ok := m.tokens.nextRefresh(uid)
	cert, certOK := m.podCerts.nextRefresh(uid)
	switch {
	case !certOK:
		return next, ok
	case !ok || cert.Before(next):
		return cert, true
	}
	return next, true
}
