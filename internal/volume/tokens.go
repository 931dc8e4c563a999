package volume

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// tokenRefreshFraction is the part of a token's lifetime after which it is
// replaced, as the kubelet's token manager does.
const tokenRefreshFraction = 0.8

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
func (c *tokenCache) get(uid types.UID, audience string, expiration int64, request func() (string, error)) (string, error) {
	key := tokenKey{audience: audience, expiration: expiration}
	now := c.clock.Now()
	c.mu.Lock()
	cached, ok := c.pods[uid][key]
	c.mu.Unlock()
	if ok && now.Before(cached.refreshAt) {
		return cached.token, nil
	}
	token, err := request()
	if err != nil {
		return "", err
	}
	lifetime := time.Duration(float64(expiration) * tokenRefreshFraction * float64(time.Second))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods[uid] == nil {
		c.pods[uid] = map[tokenKey]cachedToken{}
	}
	c.pods[uid][key] = cachedToken{token: token, refreshAt: now.Add(lifetime)}
	return token, nil
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

// NextRefresh returns when the earliest service account token written for
// the pod is due for refresh; the caller re-runs SetUp then (for example with
// RequeueAfter). It reports false when the pod has no token.
func (m *Manager) NextRefresh(uid types.UID) (time.Time, bool) {
	return m.tokens.nextRefresh(uid)
}
