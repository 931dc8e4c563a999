package volume

import (
	"context"
	"fmt"
	"io/fs"
	"maps"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// defaultFileMode is the API's default for defaultMode, used when an
	// object was not defaulted by an API server.
	defaultFileMode int32 = 0o644
	// tokenModeWithFSGroup is the mode of a service account token when the
	// pod has an fsGroup; the group read bit is added afterwards, as the
	// kubelet does, giving 0640.
	tokenModeWithFSGroup fs.FileMode = 0o600
	// defaultTokenExpiration is the API's default expirationSeconds.
	defaultTokenExpiration int64 = 3600
)

// keyedObject is a ConfigMap's or Secret's data, named for messages.
type keyedObject struct {
	kind string // "configmap" or "secret", as the kubelet's messages say
	name string
	data map[string][]byte
}

func modeOrDefault(mode *int32) fs.FileMode {
	if mode == nil {
		return fs.FileMode(defaultFileMode)
	}
	return fs.FileMode(*mode) & fs.ModePerm
}

func isOptional(optional *bool) bool { return optional != nil && *optional }

// getConfigMap returns the ConfigMap's data, or nil if it does not exist and
// is optional.
func (m *Manager) getConfigMap(ctx context.Context, namespace, name string, optional bool) (*keyedObject, error) {
	cm, err := m.fetcher.ConfigMap(ctx, namespace, name)
	if err != nil {
		return nil, missingOrError("configmap", name, optional, err)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return &keyedObject{kind: "configmap", name: name, data: data}, nil
}

// getSecret returns the Secret's data, or nil if it does not exist and is
// optional.
func (m *Manager) getSecret(ctx context.Context, namespace, name string, optional bool) (*keyedObject, error) {
	s, err := m.fetcher.Secret(ctx, namespace, name)
	if err != nil {
		return nil, missingOrError("secret", name, optional, err)
	}
	data := make(map[string][]byte, len(s.Data)+len(s.StringData))
	maps.Copy(data, s.Data)
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return &keyedObject{kind: "secret", name: name, data: data}, nil
}

// MissingObjectError is a required ConfigMap or Secret that does not exist.
// Its text is the kubelet's (`configmap "name" not found`), and
// k8s.io/apimachinery/pkg/api/errors.IsNotFound is true of it.
type MissingObjectError struct {
	Kind string // "configmap" or "secret"
	Name string
}

func (e *MissingObjectError) Error() string { return e.notFound().Error() }

// Unwrap returns the API's NotFound error of the object.
func (e *MissingObjectError) Unwrap() error { return e.notFound() }

func (e *MissingObjectError) notFound() error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: e.Kind}, e.Name)
}

// missingOrError turns a fetch error into nil for a missing optional object
// (the kubelet projects it as an object without data, so its files go), a
// *MissingObjectError for a missing required one, or a wrapped error.
func missingOrError(kind, name string, optional bool, err error) error {
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting %s %q: %w", kind, name, err)
	}
	if optional {
		return nil
	}
	return &MissingObjectError{Kind: kind, Name: name}
}

// keyPayload projects the keys of obj into files: all keys when items is
// empty, else the listed ones, each with its own mode or defaultMode. A
// listed key that obj lacks is an error unless optional.
func keyPayload(obj *keyedObject, items []v1.KeyToPath, defaultMode fs.FileMode, optional bool) (payload, error) {
	p := payload{}
	if obj == nil {
		return p, nil
	}
	if len(items) == 0 {
		for k, v := range obj.data {
			p[k] = file{data: v, mode: defaultMode}
		}
		return p, nil
	}
	for _, item := range items {
		v, ok := obj.data[item.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s references non-existent %s key: %s", obj.kind, keyWord(obj.kind), item.Key)
		}
		mode := defaultMode
		if item.Mode != nil {
			mode = modeOrDefault(item.Mode)
		}
		p[item.Path] = file{data: v, mode: mode}
	}
	return p, nil
}

func keyWord(kind string) string {
	if kind == "configmap" {
		return "config"
	}
	return kind
}

func (m *Manager) configMapVolumePayload(ctx context.Context, pod *v1.Pod, src *v1.ConfigMapVolumeSource) (payload, error) {
	optional := isOptional(src.Optional)
	obj, err := m.getConfigMap(ctx, pod.Namespace, src.Name, optional)
	if err != nil {
		return nil, err
	}
	return keyPayload(obj, src.Items, modeOrDefault(src.DefaultMode), optional)
}

func (m *Manager) secretVolumePayload(ctx context.Context, pod *v1.Pod, src *v1.SecretVolumeSource) (payload, error) {
	optional := isOptional(src.Optional)
	obj, err := m.getSecret(ctx, pod.Namespace, src.SecretName, optional)
	if err != nil {
		return nil, err
	}
	return keyPayload(obj, src.Items, modeOrDefault(src.DefaultMode), optional)
}

// projectedPayload merges the files of every source of a projected volume.
func (m *Manager) projectedPayload(ctx context.Context, pod *v1.Pod, src *v1.ProjectedVolumeSource) (payload, error) {
	defaultMode := modeOrDefault(src.DefaultMode)
	all := payload{}
	for i := range src.Sources {
		p, err := m.projectionPayload(ctx, pod, &src.Sources[i], defaultMode)
		if err != nil {
			return nil, err
		}
		maps.Copy(all, p)
	}
	return all, nil
}

func (m *Manager) projectionPayload(ctx context.Context, pod *v1.Pod, s *v1.VolumeProjection, defaultMode fs.FileMode) (payload, error) {
	switch {
	case s.ConfigMap != nil:
		optional := isOptional(s.ConfigMap.Optional)
		obj, err := m.getConfigMap(ctx, pod.Namespace, s.ConfigMap.Name, optional)
		if err != nil {
			return nil, err
		}
		return keyPayload(obj, s.ConfigMap.Items, defaultMode, optional)
	case s.Secret != nil:
		optional := isOptional(s.Secret.Optional)
		obj, err := m.getSecret(ctx, pod.Namespace, s.Secret.Name, optional)
		if err != nil {
			return nil, err
		}
		return keyPayload(obj, s.Secret.Items, defaultMode, optional)
	case s.DownwardAPI != nil:
		return m.downwardAPIPayload(pod, s.DownwardAPI.Items, defaultMode)
	case s.ServiceAccountToken != nil:
		return m.tokenPayload(ctx, pod, s.ServiceAccountToken, defaultMode)
	case s.ClusterTrustBundle != nil:
		return m.trustBundlePayload(ctx, s.ClusterTrustBundle, defaultMode)
	case s.PodCertificate != nil:
		return m.podCertPayload(ctx, pod, s.PodCertificate, defaultMode)
	default:
		return nil, fmt.Errorf("projected source of unknown type")
	}
}

// tokenPayload writes the pod's service account token, reusing a cached one
// until it is due for refresh.
func (m *Manager) tokenPayload(ctx context.Context, pod *v1.Pod, s *v1.ServiceAccountTokenProjection, defaultMode fs.FileMode) (payload, error) {
	expiration := defaultTokenExpiration
	if s.ExpirationSeconds != nil {
		expiration = *s.ExpirationSeconds
	}
	token, err := m.tokens.get(pod.UID, s.Audience, expiration, func() (authenticationv1.TokenRequestStatus, error) {
		return m.fetcher.ServiceAccountToken(ctx, pod, s.Audience, expiration)
	})
	if err != nil {
		return nil, fmt.Errorf("requesting service account token of %q: %w", pod.Spec.ServiceAccountName, err)
	}
	mode := defaultMode
	if fsGroup(pod) != nil {
		mode = tokenModeWithFSGroup
	}
	return payload{s.Path: {data: []byte(token), mode: mode}}, nil
}
