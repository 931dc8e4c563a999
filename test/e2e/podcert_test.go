package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

// podCertSigner plays a PodCertificateRequest signer: it answers the
// requests of its signer name in one namespace, issuing a certificate from
// its CA for the request's key, or denying them.
type podCertSigner struct {
	name string
	key  *ecdsa.PrivateKey
	ca   *x509.Certificate
	deny string
}

func newPodCertSigner(name string) *podCertSigner {
	GinkgoHelper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e pod CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	ca, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	return &podCertSigner{name: name, key: key, ca: ca}
}

// spiffeID is the identity the signer gives a pod.
func spiffeID(r *certificatesv1.PodCertificateRequest) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: "e2e.nodelet.test", Path: "/ns/" + r.Namespace + "/sa/" + r.Spec.ServiceAccountName}
}

// run answers the pending requests of namespace until ctx ends.
func (s *podCertSigner) run(ctx context.Context, c client.Client, namespace string) {
	defer GinkgoRecover()
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var list certificatesv1.PodCertificateRequestList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return false, nil
		}
		for i := range list.Items {
			r := &list.Items[i]
			if r.Spec.SignerName != s.name || len(r.Status.Conditions) > 0 {
				continue
			}
			s.answer(r)
			if err := c.Status().Update(ctx, r); err != nil {
				GinkgoWriter.Printf("signer: updating %s: %v\n", r.Name, err)
			}
		}
		return false, nil
	})
}

func (s *podCertSigner) answer(r *certificatesv1.PodCertificateRequest) {
	now := metav1.Now().Rfc3339Copy()
	if s.deny != "" {
		r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied,
			Status: metav1.ConditionTrue, Reason: s.deny, Message: "the e2e signer refuses this pod", LastTransitionTime: now}}
		return
	}
	csr, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	Expect(err).NotTo(HaveOccurred())
	notBefore, notAfter := now.Add(-time.Minute), now.Add(2*time.Hour)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:   pkix.Name{CommonName: r.Spec.PodName, Organization: []string{r.Namespace}},
		URIs:      []*url.URL{spiffeID(r)},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, csr.PublicKey, s.key)
	Expect(err).NotTo(HaveOccurred())
	r.Status.CertificateChain = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ca.Raw}))
	r.Status.NotBefore = &metav1.Time{Time: notBefore}
	r.Status.NotAfter = &metav1.Time{Time: notAfter}
	r.Status.BeginRefreshAt = &metav1.Time{Time: notBefore.Add(time.Hour)}
	r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued,
		Status: metav1.ConditionTrue, Reason: "Issued", Message: "issued by the e2e signer", LastTransitionTime: now}}
}

var _ = Describe("PodCertificate projected volumes", Ordered, func() {
	const node = "e2e-podcert"
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd, Args: []string{"-v=1"}}
	})

	// setUp makes a namespace with its default service account, a signer
	// answering there, and a pod projecting a credential bundle and a key
	// and chain; the container copies what it sees to a host directory.
	setUp := func(ctx SpecContext, deny string) (ns, out string, signer *podCertSigner) {
		ns = utils.NewNamespace(ctx, env.Admin)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if err := env.Admin.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		signer = newPodCertSigner("e2e.nodelet.test/signer")
		signer.deny = deny
		signerCtx, stop := context.WithCancel(context.Background())
		DeferCleanup(stop)
		go signer.run(signerCtx, env.Admin, ns)

		var err error
		out, err = os.MkdirTemp("", "nodelet-e2e-podcert-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, out)
		pod := utils.BusyboxPod(ns, "certified", node, "sh", "-c",
			`cat /creds/bundle.pem > /out/bundle.pem && cat /creds/key.pem /creds/chain.pem > /out/parts.pem && `+
				`stat -L -c '%n %a' /creds/bundle.pem /creds/key.pem /creds/chain.pem > /out/modes && sleep 3600`)
		pod.Spec.ServiceAccountName = "default"
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o640),
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: signer.name, KeyType: "ECDSAP256", CredentialBundlePath: "bundle.pem",
					KeyPath: "key.pem", CertificateChainPath: "chain.pem",
				}}},
			}}},
			{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}},
		}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}, {Name: "out", MountPath: "/out"}}
		createPod(ctx, env.Admin, pod)
		return ns, out, signer
	}

	It("runs a pod with the key and the certificate chain a PodCertificate signer issued", func(ctx SpecContext) {
		ns, out, signer := setUp(ctx, "")
		utils.WaitForPod(ctx, env.Admin, ns, "certified", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		var modes string
		Eventually(func(g Gomega) {
			data, err := os.ReadFile(filepath.Join(out, "modes"))
			g.Expect(err).NotTo(HaveOccurred())
			modes = string(data)
			g.Expect(strings.Count(modes, "\n")).To(Equal(3))
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		Expect(modes).To(Equal("/creds/bundle.pem 640\n/creds/key.pem 640\n/creds/chain.pem 640\n"))

		bundle, err := os.ReadFile(filepath.Join(out, "bundle.pem"))
		Expect(err).NotTo(HaveOccurred())
		parts, err := os.ReadFile(filepath.Join(out, "parts.pem"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(parts)).To(Equal(string(bundle)), "key.pem and chain.pem are the bundle's parts")

		block, rest := pem.Decode(bundle)
		Expect(block).NotTo(BeNil())
		Expect(block.Type).To(Equal("PRIVATE KEY"))
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		Expect(key).To(BeAssignableToTypeOf(&ecdsa.PrivateKey{}))
		var certs []*x509.Certificate
		for {
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			Expect(block.Type).To(Equal("CERTIFICATE"))
			c, err := x509.ParseCertificate(block.Bytes)
			Expect(err).NotTo(HaveOccurred())
			certs = append(certs, c)
		}
		Expect(certs).To(HaveLen(2))
		leaf := certs[0]
		Expect(key.(crypto.Signer).Public().(*ecdsa.PublicKey).Equal(leaf.PublicKey)).To(BeTrue(), "the key is the leaf's")
		Expect(certs[1].Equal(signer.ca)).To(BeTrue())
		Expect(leaf.CheckSignatureFrom(signer.ca)).To(Succeed())
		Expect(leaf.Subject.CommonName).To(Equal("certified"))
		Expect(leaf.Subject.Organization).To(Equal([]string{ns}))
		Expect(leaf.URIs).To(HaveLen(1))
		Expect(leaf.URIs[0].String()).To(Equal("spiffe://e2e.nodelet.test/ns/" + ns + "/sa/default"))

		// The request names the pod, its service account and the node.
		var reqs certificatesv1.PodCertificateRequestList
		Expect(env.Admin.List(ctx, &reqs, client.InNamespace(ns))).To(Succeed())
		Expect(reqs.Items).To(HaveLen(1))
		spec := reqs.Items[0].Spec
		var pod corev1.Pod
		Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "certified"}, &pod)).To(Succeed())
		var n corev1.Node
		Expect(env.Admin.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
		Expect(spec.PodName).To(Equal("certified"))
		Expect(spec.PodUID).To(Equal(pod.UID))
		Expect(spec.ServiceAccountName).To(Equal("default"))
		Expect(string(spec.NodeName)).To(Equal(node))
		Expect(spec.NodeUID).To(Equal(n.UID))
		Expect(meta.IsStatusConditionTrue(reqs.Items[0].Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeIssued)).To(BeTrue())

		// Neither the key nor the certificate is logged.
		keyBody := strings.Split(string(bundle), "\n")[2]
		Expect(env.Nodelet.LogTail(100000)).NotTo(ContainSubstring(keyBody))
	})

	It("leaves a pod whose PodCertificateRequest was denied not running, with an Event naming the reason", func(ctx SpecContext) {
		ns, _, _ := setUp(ctx, "NotAllowedForE2E")
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(env.Admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var messages []string
			for _, e := range events.Items {
				if e.Reason == "FailedMount" {
					messages = append(messages, e.Message)
				}
			}
			g.Expect(messages).To(ContainElement(ContainSubstring(`PodCertificateRequest was permanently denied: reason="NotAllowedForE2E"`)))
		}).WithTimeout(podStartTimeout).WithPolling(pollInterval).Should(Succeed())
		var pod corev1.Pod
		Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "certified"}, &pod)).To(Succeed())
		Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
		Expect(pod.Status.ContainerStatuses).To(Or(BeEmpty(), ContainElement(HaveField("State.Waiting.Reason", "ContainerCreating"))))
	})
})
