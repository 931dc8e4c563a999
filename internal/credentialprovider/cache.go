package credentialprovider

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// globalCacheKey is the base key of a response with cacheKeyType
	// Global; the brackets keep it apart from any image or registry.
	globalCacheKey = "<global>"
	// cachePurgeInterval is how often expired entries are dropped.
	cachePurgeInterval = 15 * time.Minute
)

// authEntry is one entry of a plugin response's auth map.
type authEntry struct {
	key      string // as the plugin returned it
	username string
	password string
}

// cacheKey is where a response is cached: its base is the image, the
// image's registry or globalCacheKey, as the response's cacheKeyType says;
// serviceAccount is the serviceAccountKey of a request in service account
// token mode, else empty.
type cacheKey struct {
	base           string
	serviceAccount string
}

type cacheEntry struct {
	auths     []authEntry
	expiresAt time.Time
}

// credentialCache holds the responses of one provider until they expire.
type credentialCache struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	entries   map[cacheKey]cacheEntry
	lastPurge time.Time
}

func newCredentialCache(c clock.PassiveClock) *credentialCache {
	return &credentialCache{clock: c, entries: map[cacheKey]cacheEntry{}, lastPurge: c.Now()}
}

// get returns the unexpired entry for image, looking up the image, then its
// registry, then the global key, as the kubelet does.
func (c *credentialCache) get(image, serviceAccount string) ([]authEntry, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.After(c.lastPurge.Add(cachePurgeInterval)) {
		for k, e := range c.entries {
			if now.After(e.expiresAt) {
				delete(c.entries, k)
			}
		}
		c.lastPurge = now
	}
	for _, base := range []string{image, registryOf(image), globalCacheKey} {
		k := cacheKey{base: base, serviceAccount: serviceAccount}
		e, ok := c.entries[k]
		if !ok {
			continue
		}
		if now.After(e.expiresAt) {
			delete(c.entries, k)
			continue
		}
		return e.auths, true
	}
	return nil, false
}

// add caches auths under key for ttl, which must be positive.
func (c *credentialCache) add(key cacheKey, auths []authEntry, ttl time.Duration) {
	expiresAt := c.clock.Now().Add(ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[key] = cacheEntry{auths: auths, expiresAt: expiresAt}
}
