package controller

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/objectstore"
)

// volumeObjects is what the volume manager reads: ConfigMaps and Secrets
// from the referenced-object store (no API request once the store holds
// them, the last content seen while the API server is away, NotFound once
// the object is deleted: see objectstore.Store.ExistingReader), service
// account tokens bound to a pod, requested from the API server, and the
// claims of the node's pods and their PVs, each read with one GET: the Node
// authorizer allows exactly those by name, and never a list or a watch.
// ClusterTrustBundles, public trust anchors, are read from the API server
// each time a volume projects them.
type volumeObjects struct {
	objectstore.Reader
	tokens tokenRequester
	claims kubernetes.Interface
	node   string
}

func (o volumeObjects) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return o.claims.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (o volumeObjects) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return o.claims.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (o volumeObjects) ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	return o.claims.CertificatesV1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{})
}

func (o volumeObjects) ClusterTrustBundles(ctx context.Context, signerName string) ([]certificatesv1.ClusterTrustBundle, error) {
	list, err := o.claims.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.signerName", signerName).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// CreatePodCertificateRequest fills in the node's UID and the service
// account's UID, which NodeRestriction checks, and creates the request.
func (o volumeObjects) CreatePodCertificateRequest(ctx context.Context, req *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	node, err := o.claims.CoreV1().Nodes().Get(ctx, o.node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", o.node, err)
	}
	sa, err := o.claims.CoreV1().ServiceAccounts(req.Namespace).Get(ctx, req.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading service account %s/%s: %w", req.Namespace, req.Spec.ServiceAccountName, err)
	}
	req = req.DeepCopy()
	req.Spec.NodeName, req.Spec.NodeUID = types.NodeName(node.Name), node.UID
	req.Spec.ServiceAccountUID = sa.UID
	return o.claims.CertificatesV1().PodCertificateRequests(req.Namespace).Create(ctx, req, metav1.CreateOptions{})
}

func (o volumeObjects) PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	return o.claims.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (o volumeObjects) ServiceAccountToken(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (authenticationv1.TokenRequestStatus, error) {
	return o.tokens.ServiceAccountToken(ctx, pod, audience, expirationSeconds)
}

// tokenRequester requests service account tokens bound to a pod: what the
// Node authorizer lets a node do for the pods bound to it.
type tokenRequester struct {
	c client.Client
}

func (o tokenRequester) ServiceAccountToken(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (authenticationv1.TokenRequestStatus, error) {
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
		return authenticationv1.TokenRequestStatus{}, fmt.Errorf("requesting a token for service account %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return req.Status, nil
}
