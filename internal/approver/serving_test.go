package approver

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecideServing(t *testing.T) {
	nodeGroups := []string{"system:nodes", "system:authenticated"}
	subject := pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}
	own := csrRequest(t, &x509.CertificateRequest{Subject: subject, DNSNames: []string{"a"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}})
	serving := func(request []byte, user string) certificatesv1.CertificateSigningRequest {
		c := csrOf("s", request, user, nodeGroups, 0)
		c.Spec.SignerName = certificatesv1.KubeletServingSignerName
		c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
		return c
	}
	nodeA := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"nodelet.io/agent": "nodelet"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "a"},
		}},
	}
	kubeletNode := nodeA.DeepCopy()
	kubeletNode.Labels = nil

	cases := []struct {
		name   string
		csr    certificatesv1.CertificateSigningRequest
		modify func(*certificatesv1.CertificateSigningRequest)
		node   *corev1.Node
		want   Verdict
	}{
		{name: "own names of a nodelet Node", csr: serving(own, "system:node:a"), node: nodeA, want: Approve},
		{name: "a name the Node does not report", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: subject, DNSNames: []string{"a", "kubernetes.default"}}), "system:node:a"), node: nodeA},
		{name: "an IP the Node does not report", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: subject, IPAddresses: []net.IP{net.ParseIP("10.0.0.2")}}), "system:node:a"), node: nodeA},
		{name: "no names", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: subject}), "system:node:a"), node: nodeA},
		{name: "an email", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: subject, DNSNames: []string{"a"}, EmailAddresses: []string{"x@example.com"}}), "system:node:a"), node: nodeA},
		{name: "client usage", csr: serving(own, "system:node:a"), modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
		}, node: nodeA},
		{name: "another node's subject", csr: serving(own, "system:node:b"), node: nodeA},
		{name: "a kubelet's Node", csr: serving(own, "system:node:a"), node: kubeletNode},
		{name: "no Node", csr: serving(own, "system:node:a")},
		{name: "not a node", csr: serving(own, "system:bootstrap:abcdef"), modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Groups = tokenGroups("a")
		}, node: nodeA},
		{name: "client signer", csr: serving(own, "system:node:a"), modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
		}, node: nodeA},
		{name: "already approved", csr: withCondition(serving(own, "system:node:a"), certificatesv1.CertificateApproved), node: nodeA},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr := tc.csr.DeepCopy()
			if tc.modify != nil {
				tc.modify(csr)
			}
			got := DecideServing(csr, tc.node)
			if got.Verdict != tc.want {
				t.Fatalf("DecideServing = %v %q (%s), want %v", got.Verdict, got.Reason, got.Message, tc.want)
			}
			if got.Verdict == Approve && got.Reason != ReasonAutoApproved {
				t.Errorf("reason %q", got.Reason)
			}
		})
	}
}
