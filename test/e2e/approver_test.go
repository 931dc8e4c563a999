package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	approverpkg "github.com/nodelet/nodelet/internal/approver"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// approverNode is a nodelet node that an admin opted in to serving
	// certificate approval; approverOtherNode another node;
	// approverKubeletNode a kubelet's node that labels itself as
	// nodelet's.
	approverNode        = "e2e-approver-a"
	approverOtherNode   = "e2e-approver-b"
	approverKubeletNode = "e2e-approver-kubelet"
	// approverDomain is the domain of the nodes' DNS names, which the
	// approver's configuration allows.
	approverDomain = "nodes.approver.e2e.test"
	// approverDecisionTimeout bounds the approval of a request the
	// approver approves.
	approverDecisionTimeout = 30 * time.Second
	// approverPendingWindow is how long a request the approver must not
	// approve is watched after it was decided on.
	approverPendingWindow = 10 * time.Second
)

// The CSR approver against a real API server with the Node authorizer and
// NodeRestriction, as config/default installs it: which serving
// certificates it approves for a node's own credentials.
var _ = Describe("CSR approver", Ordered, func() {
	var (
		api      *utils.APIServer
		admin    client.Client
		approver *utils.Component
		// asNode, asOther and asKubelet are the nodes' credentials.
		asNode, asOther, asKubelet kubernetes.Interface
		// clusterIP is the default/kubernetes Service's ClusterIP.
		clusterIP string
	)
	nodeIP := map[string]string{approverNode: "10.77.0.1", approverOtherNode: "10.77.0.2", approverKubeletNode: "10.77.0.3"}
	dnsName := func(node string) string { return strings.TrimPrefix(node, "e2e-approver-") + "." + approverDomain }

	// request creates a CSR to signer as the node whose credentials cs
	// holds, for CN=system:node:<node>, O=system:nodes and names, and
	// returns its name.
	request := func(ctx context.Context, cs kubernetes.Interface, node, signer string, names ...string) string {
		GinkgoHelper()
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}
		for _, n := range names {
			if ip := net.ParseIP(n); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, n)
			}
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
		Expect(err).NotTo(HaveOccurred())
		usage := certificatesv1.UsageServerAuth
		if signer == certificatesv1.KubeAPIServerClientKubeletSignerName {
			usage = certificatesv1.UsageClientAuth
		}
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-approver-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: signer,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, usage},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "a node may create CSRs")
		return csr.Name
	}
	serving := func(ctx context.Context, cs kubernetes.Interface, node string, names ...string) string {
		GinkgoHelper()
		return request(ctx, cs, node, certificatesv1.KubeletServingSignerName, names...)
	}
	conditions := func(ctx context.Context, g Gomega, name string) []certificatesv1.CertificateSigningRequestCondition {
		csr := &certificatesv1.CertificateSigningRequest{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, csr)).To(Succeed())
		return csr.Status.Conditions
	}
	expectApproved := func(ctx context.Context, name string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(conditions(ctx, g, name)).To(ContainElement(And(
				HaveField("Type", certificatesv1.CertificateApproved),
				HaveField("Reason", approverpkg.ReasonAutoApproved))))
		}).WithTimeout(approverDecisionTimeout).WithPolling(pollInterval).Should(Succeed(), "CSR %s is not approved", name)
	}
	// expectPending waits until the approver has logged why it leaves
	// each CSR pending (saying why) and checks that none of them is
	// approved, nor decided at all, over approverPendingWindow.
	expectPending := func(ctx context.Context, why map[string]string) {
		GinkgoHelper()
		for name, reason := range why {
			Eventually(func() []string { return approver.LogLines(name) }).
				WithTimeout(approverDecisionTimeout).WithPolling(pollInterval).
				Should(ContainElement(And(ContainSubstring("Leaving certificate signing request pending"), ContainSubstring(reason))),
					"the approver did not leave CSR %s pending for %q", name, reason)
		}
		Consistently(func(g Gomega) {
			for name := range why {
				g.Expect(conditions(ctx, g, name)).To(BeEmpty(), "CSR %s was decided", name)
			}
		}).WithTimeout(approverPendingWindow).WithPolling(500 * time.Millisecond).Should(Succeed())
	}
	// register creates node's Node with its own credentials cs, as its
	// agent does, with labels, and sets its status addresses.
	register := func(ctx context.Context, cs kubernetes.Interface, node string, labels map[string]string, addresses ...corev1.NodeAddress) {
		GinkgoHelper()
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		n.Status.Addresses = addresses
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	ownAddresses := func(node string) []corev1.NodeAddress {
		return []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: nodeIP[node]},
			{Type: corev1.NodeHostName, Address: dnsName(node)},
		}
	}

	BeforeAll(func(ctx SpecContext) {
		api = utils.MustStartAPIServer(ctx)
		var err error
		admin, err = api.AdminClient()
		Expect(err).NotTo(HaveOccurred())
		By("installing config/default's RBAC and running the approver with a serving policy")
		_, err = api.InstallNodeletAccess(ctx)
		Expect(err).NotTo(HaveOccurred())
		// 10.0.0.0/8 holds the nodes' addresses and, on purpose, the
		// cluster's Service range: no serviceCIDRs are configured, so
		// only what the approver reads of the cluster keeps the API
		// server's ClusterIP out.
		approver, err = utils.StartCSRApproverWithOptions(ctx, api, utils.CSRApproverOptions{ServingCertificates: map[string]any{
			"dnsNamePatterns": []string{"*." + approverDomain},
			"ipCIDRs":         []string{"10.0.0.0/8"},
		}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(approver.Stop)

		svc := &corev1.Service{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, svc)).To(Succeed())
		clusterIP = svc.Spec.ClusterIP
		Expect(net.ParseIP(clusterIP).To4()[0]).To(Equal(byte(10)), "the ClusterIP %s is in the configured ipCIDRs", clusterIP)

		clientset := func(node string) kubernetes.Interface {
			cfg, err := api.NodeUserConfig(node)
			Expect(err).NotTo(HaveOccurred())
			cs, err := kubernetes.NewForConfig(cfg)
			Expect(err).NotTo(HaveOccurred())
			return cs
		}
		asNode, asOther, asKubelet = clientset(approverNode), clientset(approverOtherNode), clientset(approverKubeletNode)

		By("registering the Nodes with their own credentials")
		register(ctx, asOther, approverOtherNode, nil, ownAddresses(approverOtherNode)...)
		register(ctx, asKubelet, approverKubeletNode, map[string]string{"nodelet.io/agent": "nodelet"}, ownAddresses(approverKubeletNode)...)
		// Node a claims, besides its own, every name it should not get.
		register(ctx, asNode, approverNode, map[string]string{"nodelet.io/agent": "nodelet"}, append(ownAddresses(approverNode),
			corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "kubernetes.default.svc"},
			corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "*." + approverDomain},
			corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: dnsName(approverOtherNode)},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: clusterIP},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: nodeIP[approverOtherNode]},
		)...)

		By("opting node a in as an admin")
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, approverpkg.ServingApprovalLabel, approverpkg.ServingApprovalValue)
		Expect(admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: approverNode}},
			client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	}, NodeTimeout(suiteSetupTimeout))

	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && approver != nil {
			GinkgoWriter.Printf("csr-approver log:\n%s\n", approver.LogTail(60))
		}
	})

	It("never approves the API server's names, its ClusterIP, a wildcard or another Node's address, and approves a node's own", func(ctx SpecContext) {
		own := []string{dnsName(approverNode), nodeIP[approverNode]}
		By("requesting, as node a, serving certificates for names its Node reports but no node may have")
		bad := map[string]string{
			serving(ctx, asNode, approverNode, append(own, "kubernetes.default.svc")...):   "API server's Service",
			serving(ctx, asNode, approverNode, append(own, clusterIP)...):                  "ClusterIP of the API server's Service",
			serving(ctx, asNode, approverNode, append(own, "*."+approverDomain)...):        "wildcard",
			serving(ctx, asNode, approverNode, append(own, nodeIP[approverOtherNode])...):  "address of Node " + approverOtherNode,
			serving(ctx, asNode, approverNode, append(own, dnsName(approverOtherNode))...): "address of Node " + approverOtherNode,
		}
		By("requesting one for its own names only, in the same run")
		good := serving(ctx, asNode, approverNode, own...)
		expectApproved(ctx, good)
		expectPending(ctx, bad)
	}, NodeTimeout(2*approverDecisionTimeout+approverPendingWindow+apiTimeout))

	It("approves nothing for a kubelet's Node that labels itself as nodelet's, and NodeRestriction keeps it from opting itself in", func(ctx SpecContext) {
		name := serving(ctx, asKubelet, approverKubeletNode, dnsName(approverKubeletNode), nodeIP[approverKubeletNode])
		expectPending(ctx, map[string]string{name: approverpkg.ServingApprovalLabel})

		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, approverpkg.ServingApprovalLabel, approverpkg.ServingApprovalValue)
		_, err := asKubelet.CoreV1().Nodes().Patch(ctx, approverKubeletNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a node set %s on its own Node: %v", approverpkg.ServingApprovalLabel, err)
		Expect(conditions(ctx, Default, name)).To(BeEmpty())
	}, NodeTimeout(approverDecisionTimeout+approverPendingWindow+apiTimeout))

	It("approves a node's client renewal and serving certificate only while the node has the permission", func(ctx SpecContext) {
		By("renewing node a's client certificate with the permission config/approver grants")
		expectApproved(ctx, request(ctx, asNode, approverNode, certificatesv1.KubeAPIServerClientKubeletSignerName))

		By("removing the nodes' permissions")
		for _, b := range []string{"nodelet:csr-approval:selfnodeclient", "nodelet:csr-approval:selfnodeserving"} {
			Expect(admin.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b}})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			review, err := asNode.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, selfReview(approverpkg.SubresourceSelfNodeServing), metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(review.Status.Allowed).To(BeFalse())
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed(), "RBAC still allows the permission")
		expectPending(ctx, map[string]string{
			request(ctx, asNode, approverNode, certificatesv1.KubeAPIServerClientKubeletSignerName): "may not create certificatesigningrequests/selfnodeclient",
			serving(ctx, asNode, approverNode, dnsName(approverNode), nodeIP[approverNode]):         "may not create certificatesigningrequests/selfnodeserving",
		})
	}, NodeTimeout(2*approverDecisionTimeout+approverPendingWindow+2*apiTimeout))
})

// selfReview asks whether the caller has the approver's permission sub.
func selfReview(sub string) *authorizationv1.SelfSubjectAccessReview {
	return &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: approverpkg.PermissionGroup, Resource: approverpkg.PermissionResource,
			Subresource: sub, Verb: approverpkg.PermissionVerb,
		},
	}}
}
