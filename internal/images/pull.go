package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/keylock"
)

// puller runs pulls: identical requests (same image, same credentials) that
// overlap share one pull; different requests for the same image wait for
// each other; and at most slots pulls run at once (0: no bound). A pull,
// or its wait for a slot, is cancelled once every caller waiting for it
// has gone (a deleted pod's pull does not hold a slot for ever).
type puller struct {
	images ImageService
	clock  clock.Clock
	slots  chan struct{} // nil when unbounded
	// limiter bounds pulls per second; nil when unbounded.
	limiter flowcontrol.RateLimiter
	locks   keylock.Map

	mu      sync.Mutex
	flights map[string]*flight
}

// flight is one shared pull and the callers waiting for it.
type flight struct {
	waiters int
	cancel  context.CancelFunc
	done    chan struct{}
	res     pullResult
	err     error
}

// pullResult is the outcome of one shared pull.
type pullResult struct {
	ref     string
	size    uint64
	pulling time.Duration // the pull itself
	total   time.Duration // including waiting for a slot or the image's lock
	// used is the credential the pull succeeded with; nil: none.
	used *Credential
}

func newPuller(images ImageService, clk clock.Clock, slots int, limiter flowcontrol.RateLimiter) *puller {
	p := &puller{images: images, clock: clk, limiter: limiter, flights: map[string]*flight{}}
	if slots > 0 {
		p.slots = make(chan struct{}, slots)
	}
	return p
}

// pull pulls spec with creds, then anonymously, until one succeeds. When
// ctx ends the caller stops waiting; the pull goes on while another caller
// shares it and is cancelled when none is left.
func (p *puller) pull(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandboxConfig *runtimeapi.PodSandboxConfig) (pullResult, error) {
	key := spec.GetImage() + "\x00" + fingerprint(creds)
	p.mu.Lock()
	f := p.flights[key]
	if f == nil {
		// The pull outlives any one caller: it has a context of its own,
		// with ctx's values (the logger), cancelled by the last caller.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{cancel: cancel, done: make(chan struct{})}
		p.flights[key] = f
		go func() {
			f.res, f.err = p.pullExclusive(fctx, spec, creds, sandboxConfig)
			p.mu.Lock()
			if p.flights[key] == f {
				delete(p.flights, key)
			}
			p.mu.Unlock()
			cancel()
			close(f.done)
		}()
	}
	f.waiters++
	p.mu.Unlock()
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		p.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			// A later caller starts a pull of its own.
			delete(p.flights, key)
			f.cancel()
		}
		p.mu.Unlock()
		return pullResult{}, fmt.Errorf("waiting for the pull of image %q: %w", spec.GetImage(), ctx.Err())
	}
}

// pullExclusive waits for a slot and the image's lock, then pulls.
func (p *puller) pullExclusive(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandboxConfig *runtimeapi.PodSandboxConfig) (pullResult, error) {
	waitStart := p.clock.Now()
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return pullResult{}, fmt.Errorf("waiting for a pull slot for image %q: %w", spec.GetImage(), ctx.Err())
		}
		defer func() { <-p.slots }()
	}
	unlock := p.locks.Lock(spec.GetImage())
	defer unlock()
	if err := ctx.Err(); err != nil {
		return pullResult{}, fmt.Errorf("pulling image %q: %w", spec.GetImage(), err)
	}
	if p.limiter != nil && !p.limiter.TryAccept() {
		return pullResult{}, ErrPullQPSExceeded
	}

	start := p.clock.Now()
	ref, used, err := p.tryCredentials(ctx, spec, creds, sandboxConfig)
	if err != nil {
		return pullResult{}, err
	}
	res := pullResult{ref: ref, used: used, pulling: p.clock.Since(start), total: p.clock.Since(waitStart)}
	if img, err := p.images.ImageStatus(ctx, spec); err == nil && img != nil {
		res.size = img.GetSize()
	}
	return res, nil
}

// tryCredentials pulls with each credential in turn and last without any,
// returning the first success and the credential it used (nil: none), or
// all the errors joined.
func (p *puller) tryCredentials(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandboxConfig *runtimeapi.PodSandboxConfig) (string, *Credential, error) {
	logger := log.FromContext(ctx).WithValues("image", spec.GetImage())
	var errs []error
	for i, c := range creds {
		ref, err := p.images.PullImage(ctx, spec, c.AuthConfig(), sandboxConfig)
		if err == nil {
			return ref, &creds[i], nil
		}
		logger.V(1).Info("Pull with credential failed; trying the next", "registry", c.Registry, "secret", c.Source, "err", err)
		errs = append(errs, err)
	}
	ref, err := p.images.PullImage(ctx, spec, nil, sandboxConfig)
	if err == nil {
		return ref, nil, nil
	}
	errs = append(errs, err)
	if len(errs) == 1 {
		return "", nil, err
	}
	return "", nil, errors.Join(errs...)
}

// fingerprint identifies a list of credentials without revealing them.
func fingerprint(creds []Credential) string {
	h := sha256.New()
	for _, c := range creds {
		writeAuth(h, c.auth)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// credentialHash identifies one credential without revealing it: the same
// credential in two secrets has the same hash.
func credentialHash(a *runtimeapi.AuthConfig) string {
	h := sha256.New()
	writeAuth(h, a)
	return hex.EncodeToString(h.Sum(nil))
}

func writeAuth(w io.Writer, a *runtimeapi.AuthConfig) {
	for _, f := range []string{a.GetUsername(), a.GetPassword(), a.GetIdentityToken(), a.GetRegistryToken()} {
		fmt.Fprintf(w, "%d:%s", len(f), f)
	}
}
