package credentialprovider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Options configure New.
type Options struct {
	// ConfigPath is --image-credential-provider-config: a file or a
	// directory of files.
	ConfigPath string
	// BinDir is --image-credential-provider-bin-dir, where each provider's
	// binary is found by its name.
	BinDir string
	// ServiceAccountToken and ServiceAccount serve the providers with
	// tokenAttributes; New refuses a config that has such a provider when
	// either is nil.
	ServiceAccountToken TokenFunc
	ServiceAccount      ServiceAccountFunc
}

// Providers are the credential provider plugins of a config, safe for
// concurrent use. A nil *Providers has no providers.
type Providers struct {
	providers []*provider
}

// New loads, validates and sets up the providers of opts.ConfigPath.
func New(opts Options) (*Providers, error) {
	return newProviders(opts, clock.RealClock{})
}

func newProviders(opts Options, clk clock.PassiveClock) (*Providers, error) {
	if opts.BinDir == "" {
		return nil, errors.New("credential provider bin dir is not set")
	}
	if _, err := os.Stat(opts.BinDir); err != nil {
		return nil, fmt.Errorf("reading credential provider bin dir: %w", err)
	}
	cfg, err := LoadConfig(opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	if err := Validate(cfg, opts.BinDir); err != nil {
		return nil, fmt.Errorf("validating credential provider config %s: %w", opts.ConfigPath, err)
	}
	ps := &Providers{}
	for i := range cfg.Providers {
		p, err := newProvider(opts, &cfg.Providers[i], clk)
		if err != nil {
			return nil, fmt.Errorf("setting up credential provider %s: %w", cfg.Providers[i].Name, err)
		}
		ps.providers = append(ps.providers, p)
	}
	return ps, nil
}

// provider is one plugin with its cache.
type provider struct {
	name                 string
	matchImages          []string
	defaultCacheDuration time.Duration
	plugin               *execPlugin
	tokens               *tokenAttributes // nil without tokenAttributes
	cache                *credentialCache
	flight               flight[[]authEntry]
}

func newProvider(opts Options, cp *kubeletconfigv1.CredentialProvider, clk clock.PassiveClock) (*provider, error) {
	plugin, err := newExecPlugin(opts.BinDir, cp)
	if err != nil {
		return nil, err
	}
	p := &provider{
		name:                 cp.Name,
		matchImages:          slices.Clone(cp.MatchImages),
		defaultCacheDuration: cp.DefaultCacheDuration.Duration,
		plugin:               plugin,
		cache:                newCredentialCache(clk),
	}
	if ta := cp.TokenAttributes; ta != nil {
		if opts.ServiceAccountToken == nil || opts.ServiceAccount == nil {
			return nil, errors.New("tokenAttributes is set but nodelet has no way to get service accounts and their tokens")
		}
		p.tokens = &tokenAttributes{
			audience:              ta.ServiceAccountTokenAudience,
			requireServiceAccount: *ta.RequireServiceAccount,
			requiredKeys:          slices.Clone(ta.RequiredServiceAccountAnnotationKeys),
			optionalKeys:          slices.Clone(ta.OptionalServiceAccountAnnotationKeys),
			cacheType:             ta.CacheType,
			token:                 opts.ServiceAccountToken,
			serviceAccount:        opts.ServiceAccount,
		}
	}
	return p, nil
}

// Credentials returns the credentials the providers whose matchImages match
// image give for it, for pod (which may be nil when no pod is concerned).
// image is what the kubelet passes its plugins: the image's repository,
// normalized and without tag or digest ("docker.io/library/nginx",
// "123456789012.dkr.ecr.us-west-2.amazonaws.com/app"). Only credentials whose
// auth key matches image are returned, more specific keys first (the
// kubelet's keyring order: keys reverse-sorted, equal keys in config order),
// else those for index.docker.io if image is on Docker Hub. A provider that
// fails gives none; the error joins one error per failed provider, naming
// it and the image, for the caller to log while it goes on with the
// credentials that were found and the pod's pull secrets. Errors hold no
// password or token.
func (ps *Providers) Credentials(ctx context.Context, image string, pod *corev1.Pod) ([]Credential, error) {
	if ps == nil {
		return nil, nil
	}
	var answers []providerAuths
	var errs []error
	for _, p := range ps.providers {
		if !p.matches(image) {
			continue
		}
		auths, sa, err := p.provide(ctx, image, pod)
		if err != nil {
			errs = append(errs, fmt.Errorf("getting credentials for image %s from credential provider %s: %w", image, p.name, err))
			continue
		}
		answers = append(answers, providerAuths{provider: p.name, auths: auths, serviceAccount: sa})
	}
	return credentialsFor(image, answers), errors.Join(errs...)
}

// matches reports whether one of the provider's matchImages matches image.
func (p *provider) matches(image string) bool {
	for _, m := range p.matchImages {
		if ok, _ := MatchImage(m, image); ok {
			return true
		}
	}
	return false
}

// provide returns the provider's auth entries for image, cached or from a
// run of the plugin that concurrent requests for the same image share, and
// the service account whose token the plugin was given (nil: none).
func (p *provider) provide(ctx context.Context, image string, pod *corev1.Pod) ([]authEntry, *ServiceAccountRef, error) {
	var sa *saRequest
	if p.tokens != nil {
		var skip bool
		var err error
		if sa, skip, err = p.tokens.serviceAccountRequest(ctx, image, pod); err != nil || skip {
			return nil, nil, err
		}
	}
	saKey, flightKey := "", image
	var account *ServiceAccountRef
	if sa != nil {
		saKey, flightKey = sa.cacheKey, sa.flightKey
		account = &sa.account
	}
	if auths, ok := p.cache.get(image, saKey); ok {
		return auths, account, nil
	}
	// The run, and the caching of its answer, go on when the callers that
	// wait for it give up.
	auths, err := p.flight.do(ctx, flightKey, func() ([]authEntry, error) {
		return p.fetch(context.WithoutCancel(ctx), image, sa)
	})
	return auths, account, err
}

// fetch runs the plugin for image and caches its answer.
func (p *provider) fetch(ctx context.Context, image string, sa *saRequest) ([]authEntry, error) {
	req := &credentialproviderapi.CredentialProviderRequest{Image: image}
	saKey := ""
	if sa != nil {
		req.ServiceAccountToken, req.ServiceAccountAnnotations = sa.token, sa.annotations
		saKey = sa.cacheKey
	}
	log.FromContext(ctx).V(1).Info("Running credential provider plugin", "provider", p.name, "image", image)
	resp, err := p.plugin.run(ctx, req)
	if err != nil {
		return nil, err
	}
	auths := p.authEntries(ctx, resp)
	if p.tokens != nil {
		if err := p.tokens.checkNotEchoed(sa, auths); err != nil {
			return nil, err
		}
	}
	var base string
	switch resp.CacheKeyType {
	case credentialproviderapi.ImagePluginCacheKeyType:
		base = image
	case credentialproviderapi.RegistryPluginCacheKeyType:
		base = registryOf(image)
	case credentialproviderapi.GlobalPluginCacheKeyType:
		base = globalCacheKey
	default:
		return nil, fmt.Errorf("the plugin returned cacheKeyType %q, not Image, Registry or Global", resp.CacheKeyType)
	}
	ttl := p.defaultCacheDuration
	if resp.CacheDuration != nil {
		ttl = resp.CacheDuration.Duration
	}
	if ttl > 0 {
		p.cache.add(cacheKey{base: base, serviceAccount: saKey}, auths, ttl)
	}
	return auths, nil
}

// authEntries turns the response's auth map into entries keyed as the
// kubelet's keyring keys them, in key order. An entry whose key does not
// parse is left out, as the kubelet leaves it out.
func (p *provider) authEntries(ctx context.Context, resp *credentialproviderapi.CredentialProviderResponse) []authEntry {
	auths := make([]authEntry, 0, len(resp.Auth))
	for raw, a := range resp.Auth {
		key, err := normalizeAuthKey(raw)
		if err != nil {
			log.FromContext(ctx).Error(err, "Ignoring an auth entry of a credential provider response", "provider", p.name)
			continue
		}
		auths = append(auths, authEntry{key: key, username: a.Username, password: a.Password})
	}
	slices.SortFunc(auths, func(a, b authEntry) int {
		return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.username, b.username))
	})
	return auths
}
