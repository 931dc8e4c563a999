package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/credentialprovider"
	"github.com/nodelet/nodelet/internal/features"
)

// providerTokenSeconds is the lifetime asked for a token handed to a
// credential provider plugin; it is used again until 80% of it has passed.
const providerTokenSeconds = 3600

// credentialProviders builds the image credential provider plugins of cfg,
// or returns nil when it names none. ServiceAccounts are read from the API
// server by name (the Node authorizer allows those of the node's pods; a
// cache would watch every ServiceAccount), and tokens are requested bound
// to the pod.
func credentialProviders(mgr ctrl.Manager, cfg *v1alpha1.NodeletConfiguration) (*credentialprovider.Providers, error) {
	if cfg.ImageCredentialProviderConfig == "" {
		return nil, nil
	}
	if cfg.ImageCredentialProviderBinDir == "" {
		return nil, errors.New("imageCredentialProviderConfig needs imageCredentialProviderBinDir (--image-credential-provider-bin-dir)")
	}
	if !features.Enabled(features.KubeletServiceAccountTokenForCredentialProviders) {
		pc, err := credentialprovider.LoadConfig(cfg.ImageCredentialProviderConfig)
		if err != nil {
			return nil, err
		}
		for i, p := range pc.Providers {
			if p.TokenAttributes != nil {
				return nil, fmt.Errorf("providers[%d].tokenAttributes (%s) needs the feature gate %s", i, p.Name, features.KubeletServiceAccountTokenForCredentialProviders)
			}
		}
	}
	tokens := &providerTokens{c: mgr.GetClient(), clock: clock.RealClock{}, cached: map[providerTokenKey]providerToken{}}
	reader := mgr.GetAPIReader()
	p, err := credentialprovider.New(credentialprovider.Options{
		ConfigPath:          cfg.ImageCredentialProviderConfig,
		BinDir:              cfg.ImageCredentialProviderBinDir,
		ServiceAccountToken: tokens.get,
		ServiceAccount: func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
			sa := &corev1.ServiceAccount{}
			if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sa); err != nil {
				return nil, fmt.Errorf("reading service account %s/%s: %w", namespace, name, err)
			}
			return sa, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image credential providers: %w", err)
	}
	return p, nil
}

type providerTokenKey struct {
	pod      types.UID
	sa       types.UID
	audience string
}

type providerToken struct {
	token     string
	refreshAt time.Time
}

// providerTokens requests and keeps the tokens handed to credential
// provider plugins, one per pod, service account and audience, so that a
// plugin that caches by token gets the same one.
type providerTokens struct {
	c     client.Client
	clock clock.PassiveClock

	mu     sync.Mutex
	cached map[providerTokenKey]providerToken
}

func (t *providerTokens) get(ctx context.Context, req credentialprovider.TokenRequest) (string, error) {
	key := providerTokenKey{pod: req.PodUID, sa: req.ServiceAccountUID, audience: req.Audience}
	now := t.clock.Now()
	t.mu.Lock()
	for k, v := range t.cached { // drop what has expired, pods gone included
		if !now.Before(v.refreshAt) {
			delete(t.cached, k)
		}
	}
	if v, ok := t.cached[key]; ok {
		t.mu.Unlock()
		return v.token, nil
	}
	t.mu.Unlock()

	seconds := int64(providerTokenSeconds)
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = req.Namespace, req.ServiceAccountName
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{req.Audience},
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: req.PodName, UID: req.PodUID},
	}}
	if err := t.c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token of service account %s/%s for a credential provider: %w", req.Namespace, req.ServiceAccountName, err)
	}
	lifetime := tr.Status.ExpirationTimestamp.Sub(now)
	if lifetime <= 0 {
		lifetime = time.Duration(seconds) * time.Second
	}
	t.mu.Lock()
	t.cached[key] = providerToken{token: tr.Status.Token, refreshAt: now.Add(lifetime * 8 / 10)}
	t.mu.Unlock()
	return tr.Status.Token, nil
}
