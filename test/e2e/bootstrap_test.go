package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	approverpkg "github.com/nodelet/nodelet/internal/approver"
	"github.com/nodelet/nodelet/test/utils"
)

const (
	// bootstrapNode is the node that joins with a bootstrap token. Its
	// name has dots, as host names often do: its token is bound to it by
	// the hash form of the node-binding group.
	bootstrapNode = "e2e-bootstrap.nodelet.test"
	// otherNode is a node whose certificate bootstrapNode's token must
	// not get.
	otherNode = "e2e-other"
	// bootstrapTokenTTL is how long the host's bootstrap token is valid.
	bootstrapTokenTTL = time.Hour
	// clusterSigningDuration is the lifetime of the certificates the
	// controller-manager signs here. Its signer backdates NotBefore by 5
	// minutes and, for lifetimes under 8 hours, sets NotAfter to issue
	// time + the duration: a certificate lives 8 minutes from NotBefore.
	// client-go's certificate manager rotates at 70-90% of that, 0.6 to
	// 2.2 minutes after issue, before the expiry at 3 minutes.
	clusterSigningDuration = 3 * time.Minute
	// bootstrapTimeout covers the CSR's approval and signing, registration
	// and the first Ready.
	bootstrapTimeout = 60 * time.Second
	// rotationTimeout is the latest a rotation happens after issue, with
	// margin.
	rotationTimeout = clusterSigningDuration + time.Minute
	// leaseRenewTimeout covers one renewal of the node lease (every 10 s).
	leaseRenewTimeout = 30 * time.Second
	// deniedStaysTimeout is how long a denied CSR is watched for a
	// certificate that must never come.
	deniedStaysTimeout = 5 * time.Second
	// certDirName is where nodelet keeps its client certificates under
	// its root directory by default.
	certDirName = "pki"
	// currentCertName is the client certificate in use.
	currentCertName = "nodelet-client-current.pem"
)

var _ = Describe("TLS bootstrap", Ordered, ContinueOnFailure, func() {
	var (
		api      *utils.APIServer
		kcm      *utils.Component
		approver *utils.Component
		token    *utils.BootstrapToken
		admin    client.Client
		nodelet  *utils.Nodelet
		started  time.Time
		// firstCert is the certificate the bootstrap CSR was issued.
		firstCert *x509.Certificate
		ns        string
	)

	// nodeCSRs lists the issued client CSRs of the node, oldest first,
	// with their certificates.
	nodeCSRs := func(ctx context.Context, g Gomega) ([]certificatesv1.CertificateSigningRequest, []*x509.Certificate) {
		list := &certificatesv1.CertificateSigningRequestList{}
		g.Expect(admin.List(ctx, list)).To(Succeed())
		slices.SortFunc(list.Items, func(a, b certificatesv1.CertificateSigningRequest) int {
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		})
		var csrs []certificatesv1.CertificateSigningRequest
		var certs []*x509.Certificate
		for _, csr := range list.Items {
			if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || len(csr.Status.Certificate) == 0 {
				continue
			}
			cert := parseCert(g, csr.Status.Certificate)
			if cert.Subject.CommonName != "system:node:"+bootstrapNode {
				continue
			}
			csrs, certs = append(csrs, csr), append(certs, cert)
		}
		return csrs, certs
	}
	certDir := func() string { return filepath.Join(nodelet.RootDir, certDirName) }
	currentCert := func(g Gomega) *x509.Certificate {
		data, err := os.ReadFile(filepath.Join(certDir(), currentCertName))
		g.Expect(err).NotTo(HaveOccurred())
		return parseCert(g, data)
	}

	// requestAs creates a node client CSR for CN=system:node:<name>,
	// O=system:nodes with the bootstrap token t, as a host holding it
	// could, and returns its name.
	requestAs := func(ctx context.Context, t *utils.BootstrapToken, name string) string {
		GinkgoHelper()
		cfg := rest.CopyConfig(api.Config)
		cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, t.Token()
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		}, key)
		Expect(err).NotTo(HaveOccurred())
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-token-csr-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "the token may create CSRs")
		return csr.Name
	}
	// expectDenied waits for CSR name to be denied with reason, and checks
	// that it is never approved nor issued a certificate.
	expectDenied := func(ctx context.Context, name, reason string) {
		GinkgoHelper()
		csr := &certificatesv1.CertificateSigningRequest{}
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, csr)).To(Succeed())
			g.Expect(csr.Status.Conditions).NotTo(BeEmpty())
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(csr.Status.Conditions).To(ConsistOf(And(
			HaveField("Type", certificatesv1.CertificateDenied),
			HaveField("Reason", reason),
		)), "decided by nodelet's approver")
		Consistently(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, csr)).To(Succeed())
			g.Expect(csr.Status.Certificate).To(BeEmpty(), "a certificate was issued")
			g.Expect(csr.Status.Conditions).NotTo(ContainElement(HaveField("Type", certificatesv1.CertificateApproved)))
		}).WithTimeout(deniedStaysTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	}

	BeforeAll(func(ctx SpecContext) {
		api = utils.MustStartAPIServerWithOptions(ctx, utils.APIServerOptions{BootstrapTokenAuth: true})
		// The controller-manager only signs: nothing lets it approve a
		// nodelet's request.
		kcm = utils.MustStartControllerManager(ctx, api, utils.ControllerManagerOptions{ClusterSigningDuration: clusterSigningDuration})
		utils.MustStartScheduler(ctx, api)
		var err error
		admin, err = api.AdminClient()
		Expect(err).NotTo(HaveOccurred())

		By("installing config/default's RBAC and running the CSR approver as its ServiceAccount")
		installed, err := api.InstallNodeletAccess(ctx)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("installed from config/default: %v\n", installed)
		// The serving certificate may name the node and its IP on the
		// runtime's bridge (NodeletOptions.NodeIP unset), nothing else.
		approver, err = utils.StartCSRApproverWithOptions(ctx, api, utils.CSRApproverOptions{ServingCertificates: map[string]any{
			"dnsNamePatterns": []string{bootstrapNode},
			"ipCIDRs":         []string{ctrd.Subnet.String()},
		}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(approver.Stop)

		By("making the host's bootstrap token with hack/bootstrap-token.sh")
		token, err = api.CreateNodeBootstrapToken(ctx, bootstrapNode, bootstrapTokenTTL)
		Expect(err).NotTo(HaveOccurred())

		started = time.Now()
		nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{
			NodeName:            bootstrapNode,
			API:                 api,
			Containerd:          ctrd,
			BootstrapKubeconfig: token.Kubeconfig,
			// A nodelet Node, as config/daemonset labels it, with a
			// serving certificate from the cluster.
			Config: map[string]any{"serverTLSBootstrap": true, "nodeLabels": map[string]any{"nodelet.io/agent": "nodelet"}},
		})
		if nodelet != nil {
			DeferCleanup(nodelet.Cleanup)
		}
		Expect(err).NotTo(HaveOccurred(), "starting nodelet with only a bootstrap token")
	}, NodeTimeout(suiteSetupTimeout))

	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && nodelet != nil {
			GinkgoWriter.Printf("nodelet log (%s):\n%s\n", nodelet.LogPath, nodelet.LogTail(150))
			GinkgoWriter.Printf("kube-controller-manager certificate lines:\n%s\n", strings.Join(kcm.LogLines("certificate"), "\n"))
			GinkgoWriter.Printf("csr-approver log:\n%s\n", approver.LogTail(60))
		}
	})

	It("gets a client certificate for its own node that nodelet's approver approves and the controller-manager signs", func(ctx SpecContext) {
		var csrs []certificatesv1.CertificateSigningRequest
		var certs []*x509.Certificate
		Eventually(func(g Gomega) {
			csrs, certs = nodeCSRs(ctx, g)
			g.Expect(csrs).NotTo(BeEmpty())
		}).WithTimeout(bootstrapTimeout).WithPolling(pollInterval).Should(Succeed())
		first := csrs[0]
		Expect(first.Spec.Username).To(Equal("system:bootstrap:"+token.ID), "requested with the bootstrap token")
		Expect(first.Spec.Groups).To(ContainElements(utils.BootstrappersGroup, approverpkg.BootstrappersGroup, approverpkg.NodeGroup(bootstrapNode)))
		Expect(approverpkg.NodeGroup(bootstrapNode)).To(HavePrefix("system:bootstrappers:nodelet:node-sha256:"), "a dotted name is bound by its hash")
		Expect(first.Spec.Usages).To(ConsistOf(certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth))
		Expect(first.Status.Conditions).To(ContainElement(And(
			HaveField("Type", certificatesv1.CertificateApproved),
			HaveField("Reason", "AutoApproved"),
			HaveField("Message", ContainSubstring("Auto approving nodelet client certificate for node "+bootstrapNode)),
		)), "approved by nodelet's approver, not the controller-manager")
		firstCert = certs[0]
		Expect(firstCert.Subject.Organization).To(ConsistOf("system:nodes"))
		Expect(firstCert.CheckSignatureFrom(api.ClientCA.Cert)).To(Succeed(), "signed by the CA the API server trusts")
		Expect(firstCert.NotAfter.Sub(firstCert.NotBefore)).To(BeNumerically("~", clusterSigningDuration+5*time.Minute, time.Minute))
	}, SpecTimeout(bootstrapTimeout))

	It("keeps the key and certificate readable by itself only and writes its kubeconfig", func(ctx SpecContext) {
		// The CSR is issued before nodelet has stored its certificate,
		// written its kubeconfig and removed the request's key.
		Eventually(nodelet.KubeconfigPath()).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(BeAnExistingFile())
		Eventually(filepath.Join(certDir(), "nodelet-client.key.tmp")).WithTimeout(apiTimeout).WithPolling(pollInterval).
			ShouldNot(BeAnExistingFile(), "the pending key is left after issue")
		fi, err := os.Stat(certDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o700)), "mode of %s", certDir())
		entries, err := os.ReadDir(certDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).NotTo(BeEmpty())
		for _, e := range entries {
			fi, err := os.Stat(filepath.Join(certDir(), e.Name()))
			Expect(err).NotTo(HaveOccurred())
			Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)), "mode of %s", e.Name())
		}

		fi, err = os.Stat(nodelet.KubeconfigPath())
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		kc, err := clientcmd.LoadFromFile(nodelet.KubeconfigPath())
		Expect(err).NotTo(HaveOccurred())
		auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
		Expect(auth.ClientCertificate).To(Equal(filepath.Join(certDir(), currentCertName)))
		Expect(auth.Token).To(BeEmpty())

		By("authenticating as the node with the written kubeconfig")
		cfg, err := clientcmd.BuildConfigFromFlags("", nodelet.KubeconfigPath())
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.UserInfo.Username).To(Equal("system:node:" + bootstrapNode))
		Expect(review.Status.UserInfo.Groups).To(ContainElement("system:nodes"))

		log, err := os.ReadFile(nodelet.LogPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).NotTo(ContainSubstring(token.Secret), "the bootstrap token is in the log")
		Expect(string(log)).NotTo(ContainSubstring("PRIVATE KEY"), "a key is in the log")
	}, SpecTimeout(apiTimeout))

	It("removes the bootstrap kubeconfig once it has joined", func(ctx SpecContext) {
		Eventually(func() string { return nodelet.LogTail(400) }).WithTimeout(apiTimeout).WithPolling(time.Second).
			Should(ContainSubstring("Removed the bootstrap kubeconfig"))
		Expect(token.Kubeconfig).NotTo(BeAnExistingFile(), "the host's bootstrap token stays on the host")
		Expect(nodelet.KubeconfigPath()).To(BeAnExistingFile())
	}, SpecTimeout(apiTimeout))

	It("denies a certificate for another node to the host's bootstrap token", func(ctx SpecContext) {
		name := requestAs(ctx, token, otherNode)
		expectDenied(ctx, name, approverpkg.ReasonNodeNameMismatch)
	}, SpecTimeout(apiTimeout+deniedStaysTimeout+apiTimeout))

	It("denies a second certificate for its own node to the same bootstrap token", func(ctx SpecContext) {
		name := requestAs(ctx, token, bootstrapNode)
		expectDenied(ctx, name, approverpkg.ReasonTokenAlreadyUsed)
	}, SpecTimeout(apiTimeout+deniedStaysTimeout+apiTimeout))

	It("registers the Node, which goes Ready", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: bootstrapNode}, node)).To(Succeed())
			g.Expect(utils.NodeReady(node)).To(BeTrue())
		}).WithTimeout(bootstrapTimeout).WithPolling(pollInterval).Should(Succeed())
		AddReportEntry("bootstrap to Ready", time.Since(started).Round(100*time.Millisecond).String())
		GinkgoWriter.Printf("nodelet start to Node Ready with a bootstrap token: %s\n", time.Since(started).Round(100*time.Millisecond))
	}, SpecTimeout(bootstrapTimeout))

	It("gets a serving certificate for its own addresses that nodelet's approver approves once an admin opts its Node in", func(ctx SpecContext) {
		csr := &certificatesv1.CertificateSigningRequest{}
		By("waiting for the serving CSR, which stays pending while the Node is not opted in")
		Eventually(func(g Gomega) {
			list := &certificatesv1.CertificateSigningRequestList{}
			g.Expect(admin.List(ctx, list)).To(Succeed())
			i := slices.IndexFunc(list.Items, func(c certificatesv1.CertificateSigningRequest) bool {
				return c.Spec.SignerName == certificatesv1.KubeletServingSignerName && c.Spec.Username == "system:node:"+bootstrapNode
			})
			g.Expect(i).NotTo(Equal(-1), "no serving CSR yet")
		}).WithTimeout(bootstrapTimeout).WithPolling(pollInterval).Should(Succeed())
		Eventually(func() []string { return approver.LogLines("Leaving certificate signing request pending") }).
			WithTimeout(apiTimeout).WithPolling(pollInterval).Should(ContainElement(ContainSubstring(approverpkg.ServingApprovalLabel)))
		list := &certificatesv1.CertificateSigningRequestList{}
		Expect(admin.List(ctx, list)).To(Succeed())
		for _, c := range list.Items {
			if c.Spec.SignerName == certificatesv1.KubeletServingSignerName {
				Expect(c.Status.Conditions).To(BeEmpty(), "serving CSR %s decided before the Node was opted in", c.Name)
			}
		}

		By("opting the Node in as an admin")
		node := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: bootstrapNode}, node)).To(Succeed())
		patch := client.MergeFrom(node.DeepCopy())
		node.Labels[approverpkg.ServingApprovalLabel] = approverpkg.ServingApprovalValue
		Expect(admin.Patch(ctx, node, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			list := &certificatesv1.CertificateSigningRequestList{}
			g.Expect(admin.List(ctx, list)).To(Succeed())
			i := slices.IndexFunc(list.Items, func(c certificatesv1.CertificateSigningRequest) bool {
				return c.Spec.SignerName == certificatesv1.KubeletServingSignerName && c.Spec.Username == "system:node:"+bootstrapNode
			})
			g.Expect(i).NotTo(Equal(-1), "no serving CSR yet")
			*csr = list.Items[i]
			g.Expect(csr.Status.Certificate).NotTo(BeEmpty())
		}).WithTimeout(bootstrapTimeout).WithPolling(pollInterval).Should(Succeed(), "the node's serving CSR is not approved and issued")
		Expect(csr.Status.Conditions).To(ContainElement(And(
			HaveField("Type", certificatesv1.CertificateApproved),
			HaveField("Reason", "AutoApproved"),
			HaveField("Message", ContainSubstring("serving certificate of nodelet node "+bootstrapNode)),
		)))
		cert := parseCert(Default, csr.Status.Certificate)
		Expect(admin.Get(ctx, client.ObjectKey{Name: bootstrapNode}, node)).To(Succeed())
		var addresses []string
		for _, a := range node.Status.Addresses {
			addresses = append(addresses, a.Address)
		}
		Expect(cert.DNSNames).To(ContainElement(bootstrapNode))
		for _, n := range cert.DNSNames {
			Expect(addresses).To(ContainElement(n), "a DNS name that is not the Node's")
		}
		for _, ip := range cert.IPAddresses {
			Expect(addresses).To(ContainElement(ip.String()), "an IP that is not the Node's")
		}
	}, SpecTimeout(bootstrapTimeout+apiTimeout))

	It("runs a pod the scheduler places on it", func(ctx SpecContext) {
		ns = utils.NewNamespace(ctx, admin)
		pod := utils.BusyboxPod(ns, "sleeper", "", "sleep", "3600")
		Expect(admin.Create(ctx, pod)).To(Succeed())
		p := utils.WaitForPod(ctx, admin, ns, pod.Name, podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Spec.NodeName).To(Equal(bootstrapNode))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(utils.PodReady(p)).To(BeTrue())
		})
		Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	}, SpecTimeout(podStartTimeout+apiTimeout))

	It("rotates its client certificate without a restart of itself or the pod", func(ctx SpecContext) {
		Expect(firstCert).NotTo(BeNil(), "the bootstrap certificate was not seen")
		pid := nodelet.PID()
		before := utils.GetPod(ctx, admin, ns, "sleeper")(Default)
		Expect(before.Status.ContainerStatuses).To(HaveLen(1))
		containerID := before.Status.ContainerStatuses[0].ContainerID

		By("waiting for a certificate with another serial number")
		Eventually(func(g Gomega) {
			cur := currentCert(g)
			g.Expect(cur.SerialNumber).NotTo(Equal(firstCert.SerialNumber))
		}).WithTimeout(time.Until(firstCert.NotAfter) + time.Minute).WithPolling(time.Second).Should(Succeed())
		rotated := time.Now()
		issuedAt := firstCert.NotBefore.Add(5 * time.Minute)
		AddReportEntry("rotation after issue", rotated.Sub(issuedAt).Round(time.Second).String())
		GinkgoWriter.Printf("client certificate rotated %s after the first was issued\n", rotated.Sub(issuedAt).Round(time.Second))

		By("finding the renewal CSR, made as the node and approved by nodelet's approver")
		Eventually(func(g Gomega) {
			csrs, _ := nodeCSRs(ctx, g)
			g.Expect(len(csrs)).To(BeNumerically(">=", 2))
			renewal := csrs[1]
			g.Expect(renewal.Spec.Username).To(Equal("system:node:" + bootstrapNode))
			g.Expect(renewal.Status.Conditions).To(ContainElement(And(
				HaveField("Type", certificatesv1.CertificateApproved),
				HaveField("Reason", "AutoApproved"),
				HaveField("Message", ContainSubstring("renewal of node "+bootstrapNode)),
			)))
		}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
		Eventually(func() string { return nodelet.LogTail(400) }).WithTimeout(apiTimeout).WithPolling(time.Second).
			Should(ContainSubstring("Client certificate rotated"))

		By("reporting the time left on the certificate in use")
		Eventually(func(g Gomega) {
			text, err := nodelet.Metrics(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(text).To(MatchRegexp(`(?m)^kubelet_certificate_manager_client_ttl_seconds [0-9]`))
		}).WithTimeout(apiTimeout).WithPolling(time.Second).Should(Succeed())

		By("keeping nodelet and the pod running")
		Expect(nodelet.Running()).To(BeTrue())
		Expect(nodelet.PID()).To(Equal(pid), "nodelet restarted")
		after := utils.GetPod(ctx, admin, ns, "sleeper")(Default)
		Expect(after.Status.ContainerStatuses[0].ContainerID).To(Equal(containerID))
		Expect(after.Status.ContainerStatuses[0].RestartCount).To(BeZero())
		Expect(after.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())

		By("renewing the node lease after the first certificate expired")
		wait := time.Until(firstCert.NotAfter)
		if wait > 0 {
			GinkgoWriter.Printf("waiting %s for the first certificate to expire\n", wait.Round(time.Second))
			select {
			case <-ctx.Done():
				Fail("interrupted while waiting for the first certificate to expire")
			case <-time.After(wait):
			}
		}
		Eventually(func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: bootstrapNode}, lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
			g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", firstCert.NotAfter))
		}).WithTimeout(leaseRenewTimeout).WithPolling(time.Second).Should(Succeed())
		Expect(nodelet.PID()).To(Equal(pid), "nodelet restarted")
	}, SpecTimeout(rotationTimeout+clusterSigningDuration+2*leaseRenewTimeout))
})

// parseCert parses the first certificate in PEM data (a pair file holds
// the certificate and its key).
func parseCert(g Gomega, data []byte) *x509.Certificate {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		g.Expect(block).NotTo(BeNil(), "no certificate in the PEM data")
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		return cert
	}
}
