package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/keylock"
)

// puller runs pulls: identical requests (same image, same credentials) that
// overlap share one pull; different requests for the same image wait for
// each other; and at most slots pulls run at once (0: no bound).
type puller struct {
	images ImageService
	clock  clock.Clock
	slots  chan struct{} // nil when unbounded
	flight singleflight.Group
	locks  keylock.Map
}

// pullResult is the outcome of one shared pull.
type pullResult struct {
	ref     string
	size    uint64
	pulling time.Duration // the pull itself
	total   time.Duration // including waiting for a slot or the image's lock
}

func newPuller(images ImageService, clk clock.Clock, slots int) *puller {
	p := &puller{images: images, clock: clk}
	if slots > 0 {
		p.slots = make(chan struct{}, slots)
	}
	return p
}

// pull pulls spec with creds, then anonymously, until one succeeds. The
// pull goes on when ctx ends (others may share it, and the runtime's pull
// timeout bounds it); the caller stops waiting for it.
func (p *puller) pull(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandboxConfig *runtimeapi.PodSandboxConfig) (pullResult, error) {
	key := spec.GetImage() + "\x00" + fingerprint(creds)
	detached := context.WithoutCancel(ctx)
	ch := p.flight.DoChan(key, func() (any, error) {
		return p.pullExclusive(detached, spec, creds, sandboxConfig)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return pullResult{}, res.Err
		}
		return res.Val.(pullResult), nil
	case <-ctx.Done():
		return pullResult{}, fmt.Errorf("waiting for the pull of image %q: %w", spec.GetImage(), ctx.Err())
	}
}

// pullExclusive waits for a slot and the image's lock, then pulls.
func (p *puller) pullExclusive(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandboxConfig *runtimeapi.PodSandboxConfig) (pullResult, error) {
	waitStart := p.clock.Now()
	if p.slots != nil {
		p.slots <- struct{}{}
		defer func() { <-p.slots }()
	}
	unlock := p.locks.Lock(spec.GetImage())
	defer unlock()

	start := p.clock.Now()
	ref, err := p.tryCredentials(ctx, spec, creds, sandboxConfig)
	if err != nil {
		return pullResult{}, err
	}
	res := pullResult{ref: ref, pulling: p.clock.Since(start), total: p.clock.Since(waitStart)}
	if img, err := p.images.ImageStatus(ctx, spec); err == nil && img != nil {
		res.size = img.GetSize()
	}
	return res, nil
}

// tryCredentials pulls with each credential in turn and last without any,
// returning the first success or all the errors joined.
func (p *puller) tryCredentials(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	logger := log.FromContext(ctx).WithValues("image", spec.GetImage())
	var errs []error
	for _, c := range creds {
		ref, err := p.images.PullImage(ctx, spec, c.AuthConfig(), sandboxConfig)
		if err == nil {
			return ref, nil
		}
		logger.V(1).Info("Pull with credential failed; trying the next", "registry", c.Registry, "secret", c.Source, "err", err)
		errs = append(errs, err)
	}
	ref, err := p.images.PullImage(ctx, spec, nil, sandboxConfig)
	if err == nil {
		return ref, nil
	}
	errs = append(errs, err)
	if len(errs) == 1 {
		return "", err
	}
	return "", errors.Join(errs...)
}

// fingerprint identifies a list of credentials without revealing them.
func fingerprint(creds []Credential) string {
	h := sha256.New()
	for _, c := range creds {
		a := c.auth
		for _, f := range []string{a.GetUsername(), a.GetPassword(), a.GetIdentityToken(), a.GetRegistryToken()} {
			fmt.Fprintf(h, "%d:%s", len(f), f)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
