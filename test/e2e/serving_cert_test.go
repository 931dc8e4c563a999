package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// servingFilesNode serves configured files, servingExpiredNode starts
	// on an expired self-signed pair, servingBootstrapNode has
	// serverTLSBootstrap.
	servingFilesNode     = "e2e-serving-files"
	servingExpiredNode   = "e2e-serving-expired"
	servingBootstrapNode = "e2e-serving-bootstrap"
	// servingReloadTimeout is nodelet's reload period (15 s) with margin.
	servingReloadTimeout = 30 * time.Second
	// servingCSRTimeout covers registration, the first Node status with
	// addresses and the CSR.
	servingCSRTimeout = 60 * time.Second
)

var _ = Describe("Node API serving certificate", func() {
	// servedCertificate dials addr and returns the certificate it serves,
	// or the handshake's error.
	servedCertificate := func(addr string) (*x509.Certificate, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads what is served
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	// status sends GET /pods to the node API with cert and returns the
	// status code.
	status := func(ctx context.Context, addr string, cert tls.Certificate) int {
		GinkgoHelper()
		c := &http.Client{Timeout: apiTimeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}, //nolint:gosec // test client
		}}}
		defer c.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/pods", http.NoBody)
		Expect(err).NotTo(HaveOccurred())
		resp, err := c.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		return resp.StatusCode
	}
	printLog := func(n **utils.Nodelet) {
		JustAfterEach(func() {
			if CurrentSpecReport().Failed() && *n != nil {
				GinkgoWriter.Printf("nodelet log (%s):\n%s\n", (*n).LogPath, (*n).LogTail(150))
			}
		})
	}

	Context("with tlsCertFile and clientCAFile", Ordered, func() {
		var nodelet *utils.Nodelet
		printLog(&nodelet)

		It("serves a replaced certificate and trusts a replaced CA bundle within the reload period", func(ctx SpecContext) {
			dir := GinkgoT().TempDir()
			certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "client-ca.crt")
			first := writeServingPair(certFile, keyFile, time.Hour)
			oldCA, err := utils.NewCA(dir, "old-client")
			Expect(err).NotTo(HaveOccurred())
			newCA, err := utils.NewCA(dir, "new-client")
			Expect(err).NotTo(HaveOccurred())
			replaceFile(caFile, readFile(oldCA.CertFile))
			oldCaller, err := oldCA.TLSClientCert("e2e-serving-old", "system:masters")
			Expect(err).NotTo(HaveOccurred())
			newCaller, err := newCA.TLSClientCert("e2e-serving-new", "system:masters")
			Expect(err).NotTo(HaveOccurred())

			nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: servingFilesNode, API: apiServer, Containerd: ctrd,
				Config: map[string]any{"server": map[string]any{
					"tlsCertFile": certFile, "tlsPrivateKeyFile": keyFile, "clientCAFile": caFile,
				}}})
			if nodelet != nil {
				DeferCleanup(nodelet.Cleanup)
			}
			Expect(err).NotTo(HaveOccurred())
			Eventually(func(g Gomega) {
				served, err := servedCertificate(nodelet.ServerAddr)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(served.SerialNumber).To(Equal(first.SerialNumber))
			}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
			Expect(status(ctx, nodelet.ServerAddr, oldCaller)).To(Equal(http.StatusOK))
			Expect(status(ctx, nodelet.ServerAddr, newCaller)).To(Equal(http.StatusUnauthorized))

			By("replacing the pair and the bundle on disk")
			replaced := time.Now()
			second := writeServingPair(certFile, keyFile, time.Hour)
			replaceFile(caFile, readFile(newCA.CertFile))
			Eventually(func(g Gomega) {
				served, err := servedCertificate(nodelet.ServerAddr)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(served.SerialNumber).To(Equal(second.SerialNumber))
			}).WithTimeout(servingReloadTimeout).WithPolling(pollInterval).Should(Succeed())
			Eventually(func() int { return status(ctx, nodelet.ServerAddr, newCaller) }).
				WithTimeout(servingReloadTimeout).WithPolling(pollInterval).Should(Equal(http.StatusOK), "a caller of the new CA")
			AddReportEntry("files replaced to served and trusted", time.Since(replaced).Round(100*time.Millisecond).String())
			GinkgoWriter.Printf("replaced serving pair and CA bundle in use after %s\n", time.Since(replaced).Round(100*time.Millisecond))
			Expect(status(ctx, nodelet.ServerAddr, oldCaller)).To(Equal(http.StatusUnauthorized), "a caller of the CA removed from the bundle")

			By("keeping the last good pair and bundle when the files are damaged")
			replaceFile(certFile, []byte("not a certificate"))
			replaceFile(caFile, []byte("not a bundle"))
			Eventually(func() string { return nodelet.LogTail(50) }).WithTimeout(servingReloadTimeout).WithPolling(time.Second).
				Should(And(ContainSubstring("Keeping the previous serving certificate"), ContainSubstring("Keeping the previous client CA bundle")))
			served, err := servedCertificate(nodelet.ServerAddr)
			Expect(err).NotTo(HaveOccurred())
			Expect(served.SerialNumber).To(Equal(second.SerialNumber))
			Expect(status(ctx, nodelet.ServerAddr, newCaller)).To(Equal(http.StatusOK))
		}, SpecTimeout(apiTimeout+3*servingReloadTimeout+time.Minute))
	})

	Context("with a self-signed certificate", Ordered, func() {
		var nodelet *utils.Nodelet
		printLog(&nodelet)

		It("replaces an expired one in <rootDir>/pki at start", func(ctx SpecContext) {
			dir, err := os.MkdirTemp("", "nodelet-"+servingExpiredNode+"-")
			Expect(err).NotTo(HaveOccurred())
			pki := filepath.Join(dir, "root", "pki")
			Expect(os.MkdirAll(pki, 0o700)).To(Succeed())
			certFile, keyFile := filepath.Join(pki, "nodelet.crt"), filepath.Join(pki, "nodelet.key")
			expired := writeServingPair(certFile, keyFile, -time.Hour)

			nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: servingExpiredNode, API: apiServer, Containerd: ctrd, Dir: dir})
			if nodelet != nil {
				DeferCleanup(nodelet.Cleanup)
			} else {
				DeferCleanup(os.RemoveAll, dir)
			}
			Expect(err).NotTo(HaveOccurred())
			var served *x509.Certificate
			Eventually(func(g Gomega) {
				served, err = servedCertificate(nodelet.ServerAddr)
				g.Expect(err).NotTo(HaveOccurred())
			}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
			Expect(served.SerialNumber).NotTo(Equal(expired.SerialNumber), "the expired certificate is served")
			Expect(served.NotAfter).To(BeTemporally(">", time.Now().Add(300*24*time.Hour)))
			Expect(served.NotBefore).To(BeTemporally("<", time.Now()))
			Expect(served.DNSNames).To(ContainElement(servingExpiredNode))
			hostIP, err := ctrd.HostIP()
			Expect(err).NotTo(HaveOccurred())
			Expect(served.IPAddresses).To(ContainElement(BeEquivalentTo(hostIP.To4())))

			onDisk := parseCert(Default, readFile(certFile))
			Expect(onDisk.Raw).To(Equal(served.Raw), "the certificate served is not the one written")
			for _, f := range []string{certFile, keyFile} {
				fi, err := os.Stat(f)
				Expect(err).NotTo(HaveOccurred())
				Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)), f)
			}
			Expect(nodelet.LogTail(200)).To(ContainSubstring("Made a self-signed serving certificate"))
		}, SpecTimeout(2*apiTimeout))
	})

	Context("with serverTLSBootstrap", Ordered, func() {
		var nodelet *utils.Nodelet
		printLog(&nodelet)

		It("requests a kubelet-serving certificate and serves exactly the one issued", func(ctx SpecContext) {
			cs, err := kubernetes.NewForConfig(apiServer.Config)
			Expect(err).NotTo(HaveOccurred())
			admin, err := apiServer.AdminClient()
			Expect(err).NotTo(HaveOccurred())
			nodelet, err = utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: servingBootstrapNode, API: apiServer, Containerd: ctrd,
				Config: map[string]any{"serverTLSBootstrap": true}})
			if nodelet != nil {
				DeferCleanup(nodelet.Cleanup)
			}
			Expect(err).NotTo(HaveOccurred())
			hostIP, err := ctrd.HostIP()
			Expect(err).NotTo(HaveOccurred())

			By("finding the node's CSR")
			var csr *certificatesv1.CertificateSigningRequest
			Eventually(func(g Gomega) {
				list, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				csr = nil
				for i := range list.Items {
					c := &list.Items[i]
					if c.Spec.SignerName == certificatesv1.KubeletServingSignerName && c.Spec.Username == "system:node:"+servingBootstrapNode {
						csr = c
					}
				}
				g.Expect(csr).NotTo(BeNil())
			}).WithTimeout(servingCSRTimeout).WithPolling(pollInterval).Should(Succeed())
			Expect(csr.Spec.Groups).To(ContainElement("system:nodes"))
			Expect(csr.Spec.Usages).To(ConsistOf(certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth))
			block, _ := pem.Decode(csr.Spec.Request)
			Expect(block).NotTo(BeNil())
			req, err := x509.ParseCertificateRequest(block.Bytes)
			Expect(err).NotTo(HaveOccurred())
			Expect(req.Subject.CommonName).To(Equal("system:node:" + servingBootstrapNode))
			Expect(req.Subject.Organization).To(ConsistOf("system:nodes"))
			Expect(req.DNSNames).To(ContainElement(servingBootstrapNode))
			Expect(req.IPAddresses).To(ContainElement(BeEquivalentTo(hostIP.To4())))
			node := &corev1.Node{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: servingBootstrapNode}, node)).To(Succeed())
			for _, a := range node.Status.Addresses {
				if ip := net.ParseIP(a.Address); ip != nil {
					Expect(req.IPAddresses).To(ContainElement(BeEquivalentTo(ip.To4())), "an address of the Node")
				} else {
					Expect(req.DNSNames).To(ContainElement(a.Address), "a name of the Node")
				}
			}

			By("failing handshakes while no certificate is issued, instead of serving a self-signed one")
			_, err = servedCertificate(nodelet.ServerAddr)
			Expect(err).To(HaveOccurred())
			Eventually(func() string { return nodelet.LogTail(100) }).WithTimeout(apiTimeout).WithPolling(pollInterval).
				Should(ContainSubstring("no serving certificate available for the node"))

			By("approving and signing the CSR with the cluster's CA")
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
				Reason: "E2EApproved", Message: "approved by the e2e test",
			})
			csr, err = cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			issued := signServingRequest(req, apiServer.ClientCA)
			csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issued.Raw})
			_, err = cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			issuedAt := time.Now()

			Eventually(func(g Gomega) {
				served, err := servedCertificate(nodelet.ServerAddr)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(served.Raw).To(Equal(issued.Raw))
			}).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
			GinkgoWriter.Printf("issued serving certificate served after %s\n", time.Since(issuedAt).Round(100*time.Millisecond))
			pool := x509.NewCertPool()
			pool.AddCert(apiServer.ClientCA.Cert)
			_, err = issued.Verify(x509.VerifyOptions{Roots: pool, DNSName: servingBootstrapNode, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			Expect(err).NotTo(HaveOccurred(), "a client trusting the cluster CA verifies the node")
			current := filepath.Join(nodelet.RootDir, "pki", "kubelet-server-current.pem")
			Expect(parseCert(Default, readFile(current)).Raw).To(Equal(issued.Raw), "kept for a restart")
			fi, err := os.Stat(current)
			Expect(err).NotTo(HaveOccurred())
			Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		}, SpecTimeout(servingCSRTimeout+2*apiTimeout+time.Minute))
	})
})

// writeServingPair writes a new self-signed serving certificate valid
// until now+validFor (in the past when negative) and its key, each
// replaced atomically, and returns the certificate.
func writeServingPair(certFile, keyFile string, validFor time.Duration) *x509.Certificate {
	GinkgoHelper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	Expect(err).NotTo(HaveOccurred())
	notAfter := time.Now().Add(validFor)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "e2e-serving"},
		NotBefore:    notAfter.Add(-24 * time.Hour),
		NotAfter:     notAfter,
		DNSNames:     []string{"e2e-serving"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	replaceFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	replaceFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	return cert
}

// signServingRequest signs req as the kubelet-serving signer would: for
// its subject and names, server auth, an hour.
func signServingRequest(req *x509.CertificateRequest, ca *utils.CA) *x509.Certificate {
	GinkgoHelper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      req.Subject,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPAddresses,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	return cert
}

// replaceFile replaces path with data atomically (mode 0600), as a
// certificate tool does.
func replaceFile(path string, data []byte) {
	GinkgoHelper()
	tmp := path + ".tmp"
	Expect(os.WriteFile(tmp, data, 0o600)).To(Succeed())
	Expect(os.Rename(tmp, path)).To(Succeed())
}

func readFile(path string) []byte {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return bytes.Clone(data)
}
