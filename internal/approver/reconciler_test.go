package approver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodelet/nodelet/internal/approver"
	"github.com/nodelet/nodelet/test/utils"
)

// The Reconciler against a real API server (Node,RBAC, config/default's
// RBAC applied), with a cache that lags behind it.
func TestReconciler(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CSR approver reconciler")
}

var (
	apiServer *utils.APIServer
	admin     client.Client
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(GinkgoLogr)
	apiServer = utils.MustStartAPIServer(ctx)
	var err error
	admin, err = apiServer.AdminClient()
	Expect(err).NotTo(HaveOccurred())
	_, err = apiServer.InstallNodeletAccess(ctx)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

// staleCache is a cache that has seen the CSRs of its snapshot as they
// were then and none since: reads of CSRs come from it, everything else
// goes to the API server.
type staleCache struct {
	client.Client
	snapshot []certificatesv1.CertificateSigningRequest
}

func (s *staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		for _, c := range s.snapshot {
			if c.Name == key.Name {
				c.DeepCopyInto(csr)
				return nil
			}
		}
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

func (s *staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*certificatesv1.CertificateSigningRequestList); ok {
		l.Items = nil
		for _, c := range s.snapshot {
			l.Items = append(l.Items, *c.DeepCopy())
		}
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// tokenClient authenticates as a nodelet bootstrap token bound to node,
// with the groups the API server gives such a token.
func tokenClient(id, node string) kubernetes.Interface {
	GinkgoHelper()
	user, err := apiServer.Env.ControlPlane.AddUser(envtest.User{
		Name:   "system:bootstrap:" + id,
		Groups: append([]string{"system:bootstrappers"}, approver.TokenGroups(node)...),
	}, &rest.Config{})
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(user.Config())
	Expect(err).NotTo(HaveOccurred())
	return cs
}

// createClientRequest creates CSR name, a node client request for node,
// with cs.
func createClientRequest(ctx context.Context, cs kubernetes.Interface, name, node string) *certificatesv1.CertificateSigningRequest {
	GinkgoHelper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
	}, key)
	Expect(err).NotTo(HaveOccurred())
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return csr
}

func reconcile(ctx context.Context, r *approver.Reconciler, name string) {
	GinkgoHelper()
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: name}})
	Expect(err).NotTo(HaveOccurred())
}

func conditionsOf(ctx context.Context, name string) []certificatesv1.CertificateSigningRequestCondition {
	GinkgoHelper()
	csr := &certificatesv1.CertificateSigningRequest{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: name}, csr)).To(Succeed())
	return csr.Status.Conditions
}

var _ = Describe("bootstrap token requests", Ordered, func() {
	It("approves one request of a token even when the cache has not seen the approval of the other", func(ctx SpecContext) {
		cs := tokenClient("race01", "race-node")
		// Created in this order, within a second or two: neither is the
		// earlier of the two by creation time and name alone, the way the
		// approver breaks ties.
		aaa := createClientRequest(ctx, cs, "race-aaa", "race-node")
		zzz := createClientRequest(ctx, cs, "race-zzz", "race-node")
		cache := &staleCache{Client: admin}
		r := &approver.Reconciler{Client: cache, APIReader: admin}

		By("deciding on race-zzz from a cache that has not seen race-aaa yet")
		cache.snapshot = []certificatesv1.CertificateSigningRequest{*zzz}
		reconcile(ctx, r, zzz.Name)
		By("deciding on race-aaa from a cache that has not seen race-zzz's decision yet")
		cache.snapshot = []certificatesv1.CertificateSigningRequest{*zzz, *aaa}
		reconcile(ctx, r, aaa.Name)

		approved := 0
		for _, name := range []string{aaa.Name, zzz.Name} {
			conds := conditionsOf(ctx, name)
			Expect(conds).To(HaveLen(1), "CSR %s is decided once", name)
			switch conds[0].Type {
			case certificatesv1.CertificateApproved:
				approved++
			case certificatesv1.CertificateDenied:
				Expect(conds[0].Reason).To(Equal(approver.ReasonTokenAlreadyUsed))
			}
		}
		Expect(approved).To(Equal(1), "one token, one approved request")
	}, SpecTimeout(time.Minute))

	It("denies a token's request when the token lacks the permission to have it approved", func(ctx SpecContext) {
		Expect(admin.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodelet:csr-approval:nodeclient"}})).To(Succeed())
		csr := createClientRequest(ctx, tokenClient("noperm", "noperm-node"), "noperm", "noperm-node")
		By("waiting for RBAC to drop the binding")
		Eventually(func(g Gomega) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: csr.Spec.Username, Groups: csr.Spec.Groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Group: approver.PermissionGroup, Resource: approver.PermissionResource,
					Subresource: approver.SubresourceNodeClient, Verb: approver.PermissionVerb,
				},
			}}
			g.Expect(admin.Create(ctx, sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(BeFalse())
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		reconcile(ctx, &approver.Reconciler{Client: admin, APIReader: admin}, csr.Name)
		Expect(conditionsOf(ctx, csr.Name)).To(ConsistOf(And(
			HaveField("Type", certificatesv1.CertificateDenied),
			HaveField("Reason", approver.ReasonNotAuthorized),
		)))
	}, SpecTimeout(time.Minute))
})
