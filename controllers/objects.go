package controllers

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/objectstore"
)

// apiObjects reads the ConfigMaps and Secrets pods name from the
// referenced-object store (per-name watches, the last content kept while
// the API server is away) and requests service account tokens bound to a
// pod: exactly what the Node authorizer lets a node do.
type apiObjects struct {
	objectstore.Reader
	c client.Client
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
