package credentialprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TokenRequest is the service account token a provider with tokenAttributes
// needs for a pod: a token of the pod's service account for Audience, bound
// to the pod, as the kubelet requests it (its TokenRequest names the service
// account's UID, so that a recreated account of the same name gets none).
type TokenRequest struct {
	Namespace          string
	ServiceAccountName string
	ServiceAccountUID  types.UID
	Audience           string
	PodName            string
	PodUID             types.UID
}

// TokenFunc returns the token of a TokenRequest. It should hand out the
// same token until it nears its expiry, as the kubelet's token manager does:
// a provider with cacheType Token caches credentials per token.
type TokenFunc func(ctx context.Context, req TokenRequest) (string, error)

// ServiceAccountFunc returns the service account namespace/name; the
// providers read its UID and the annotations they name.
type ServiceAccountFunc func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)

// tokenAttributes are a provider's service account token settings.
type tokenAttributes struct {
	audience              string
	requireServiceAccount bool
	requiredKeys          []string
	optionalKeys          []string
	cacheType             kubeletconfigv1.ServiceAccountTokenCacheType
	token                 TokenFunc
	serviceAccount        ServiceAccountFunc
}

// saRequest is what a request in service account token mode adds.
type saRequest struct {
	token       string
	annotations map[string]string
	// cacheKey is the service account part of the cache key:
	// namespace, name, UID and the passed annotations, and the token's
	// hash when cacheType is Token.
	cacheKey string
	// flightKey is the key concurrent requests share a run under.
	flightKey string
	// account is the service account the token is of.
	account ServiceAccountRef
}

// serviceAccountRequest gets the token and annotations to pass for pod.
// It returns nil without a service account when the provider allows that,
// and skip when the plugin is not to run: the pod has no service account
// and the provider requires one, or the account lacks a required annotation
// (which is how workloads opt in, so it is not an error).
func (t *tokenAttributes) serviceAccountRequest(ctx context.Context, image string, pod *corev1.Pod) (sa *saRequest, skip bool, err error) {
	logger := log.FromContext(ctx)
	if pod == nil || pod.Spec.ServiceAccountName == "" {
		if t.requireServiceAccount {
			logger.V(1).Info("Skipping credential provider for a pod without a service account", "image", image)
			return nil, true, nil
		}
		return nil, false, nil
	}
	ns, name := pod.Namespace, pod.Spec.ServiceAccountName
	account, err := t.serviceAccount(ctx, ns, name)
	if err != nil {
		return nil, false, fmt.Errorf("getting service account %s/%s: %w", ns, name, err)
	}
	annotations := make(map[string]string, len(t.requiredKeys)+len(t.optionalKeys))
	for _, k := range t.requiredKeys {
		v, ok := account.Annotations[k]
		if !ok {
			logger.V(1).Info("Skipping credential provider for a service account without a required annotation",
				"image", image, "serviceAccount", ns+"/"+name, "annotation", k)
			return nil, true, nil
		}
		annotations[k] = v
	}
	for _, k := range t.optionalKeys {
		if v, ok := account.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	token, err := t.token(ctx, TokenRequest{
		Namespace: ns, ServiceAccountName: name, ServiceAccountUID: account.UID,
		Audience: t.audience, PodName: pod.Name, PodUID: pod.UID,
	})
	if err != nil {
		return nil, false, fmt.Errorf("requesting a token of service account %s/%s for audience %s: %w", ns, name, t.audience, err)
	}
	if token == "" {
		return nil, false, fmt.Errorf("the token request for service account %s/%s returned no token", ns, name)
	}
	hash := tokenHash(token)
	key := appendAnnotations(appendFields(nil, ns, name, string(account.UID)), annotations)
	if t.cacheType == kubeletconfigv1.TokenServiceAccountTokenCacheType {
		key = appendFields(key, "token", hash)
	}
	return &saRequest{
		token:       token,
		annotations: annotations,
		cacheKey:    string(key),
		flightKey:   string(appendAnnotations(appendFields(nil, image, hash), annotations)),
		account:     ServiceAccountRef{Namespace: ns, Name: name, UID: account.UID},
	}, false, nil
}

// checkNotEchoed refuses credentials whose password is the token itself
// unless cacheType is Token: cached per service account, they would outlive
// the token and be shared by the account's other pods.
func (t *tokenAttributes) checkNotEchoed(sa *saRequest, auths []authEntry) error {
	if sa == nil || t.cacheType == kubeletconfigv1.TokenServiceAccountTokenCacheType {
		return nil
	}
	for _, a := range auths {
		if a.password == sa.token {
			return errors.New("the plugin returned the service account token as a password, which only cacheType Token allows")
		}
	}
	return nil
}

// tokenHash stands for a token in keys, so that they do not hold it.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// appendFields appends each field length-prefixed, so that no two lists
// of fields encode alike.
func appendFields(b []byte, fields ...string) []byte {
	for _, f := range fields {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
	}
	return b
}

// appendAnnotations appends the count of annotations, then each key and
// value in key order.
func appendAnnotations(b []byte, annotations map[string]string) []byte {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = strconv.AppendInt(b, int64(len(keys)), 10)
	b = append(b, '#')
	for _, k := range keys {
		b = appendFields(b, k, annotations[k])
	}
	return b
}
