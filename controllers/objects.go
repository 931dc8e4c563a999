package controllers

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// apiObjects reads the ConfigMaps and Secrets pods name, one GET each by
// name, and requests service account tokens bound to a pod: exactly what
// the Node authorizer lets a node do. ConfigMaps and Secrets are not cached
// (see agent.NewManager), so these reads go to the API server.
type apiObjects struct {
	c client.Client
}

func (o apiObjects) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := o.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, err
	}
	return cm, nil
}

func (o apiObjects) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := o.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return nil, err
	}
	return s, nil
}

func (o apiObjects) ServiceAccountToken(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, error) {
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = pod.Namespace, pod.Spec.ServiceAccountName
	if sa.Name == "" {
		sa.Name = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	if err := o.c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("requesting a token for service account %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return req.Status.Token, nil
}
