package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

var _ = Describe("The envtest API server", func() {
	It("applies the Node authorizer and NodeRestriction to a node's identity", func(ctx SpecContext) {
		const nodeName = "n1"
		cfg, err := apiServer.NodeUserConfig(nodeName)
		Expect(err).NotTo(HaveOccurred())
		node, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		By("creating its own Node")
		_, err = node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			admin, err := kubernetes.NewForConfig(apiServer.Config)
			Expect(err).NotTo(HaveOccurred())
			Expect(admin.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})).To(Succeed())
		})

		By("not creating another node's Node")
		_, err = node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

		By("listing only the pods bound to it")
		_, err = node.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
		})
		Expect(err).NotTo(HaveOccurred())
		_, err = node.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

		By("not listing Secrets")
		_, err = node.CoreV1().Secrets(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

		By("reviewing tokens and access, as its node API needs")
		tr, err := node.AuthenticationV1().TokenReviews().Create(ctx,
			&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "not-a-token"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(tr.Status.Authenticated).To(BeFalse())
		sar, err := node.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User:               "nobody",
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: nodeName},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(sar.Status.Allowed).To(BeFalse())
	}, SpecTimeout(apiTimeout))
})
