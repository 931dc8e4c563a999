package approver

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	// agentLabel marks the Nodes a nodelet registered (config/daemonset's
	// nodeLabels); only their serving certificates are approved.
	agentLabel = "nodelet.io/agent"
	// agentValue is agentLabel's value on nodelet's Nodes.
	agentValue = "nodelet"
)

// servingUsages are the usage sets of a node serving certificate: RSA
// keys add key encipherment.
var servingUsages = [][]certificatesv1.KeyUsage{
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
}

// ServingNodeName returns the node whose Node DecideServing needs for csr:
// the requester's node name when csr is an undecided request to
// kubernetes.io/kubelet-serving made by a node, else "".
func ServingNodeName(csr *certificatesv1.CertificateSigningRequest) string {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || decided(csr) || !isNode(csr) {
		return ""
	}
	return strings.TrimPrefix(csr.Spec.Username, nodeUserPrefix)
}

// DecideServing decides on a request to kubernetes.io/kubelet-serving,
// given the Node of its requester (nil when there is none). It approves a
// request made by system:node:<name> in system:nodes for CN=system:node:<name>,
// O=system:nodes, with the serving usages, at least one DNS or IP name and
// no email or URI names, when Node <name> is a nodelet's (label
// nodelet.io/agent=nodelet) and every DNS name is one of its Hostname,
// InternalDNS or ExternalDNS addresses and every IP one of its InternalIP
// or ExternalIP addresses. Anything else is left alone, to an admin.
func DecideServing(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node) Decision {
	name := ServingNodeName(csr)
	if name == "" || node == nil || node.Name != name || node.Labels[agentLabel] != agentValue {
		return Decision{}
	}
	if err := checkServing(csr, node); err != nil {
		return Decision{}
	}
	return Decision{Verdict: Approve, Reason: ReasonAutoApproved,
		Message: fmt.Sprintf("Auto approving the serving certificate of nodelet node %s for its own addresses", name)}
}

// checkServing returns why csr is not a serving certificate request for
// node's own names, or nil.
func checkServing(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node) error {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return fmt.Errorf("the request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fmt.Errorf("parsing the request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return fmt.Errorf("checking the request's signature: %w", err)
	}
	if req.Subject.CommonName != csr.Spec.Username || !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return fmt.Errorf("subject %q is not the requester's node subject", req.Subject)
	}
	if len(req.EmailAddresses)+len(req.URIs) > 0 || len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return fmt.Errorf("the request names emails or URIs, or no DNS name nor IP")
	}
	if !slices.ContainsFunc(servingUsages, func(want []certificatesv1.KeyUsage) bool { return sameUsages(csr.Spec.Usages, want) }) {
		return fmt.Errorf("usages %q are not a serving certificate's", csr.Spec.Usages)
	}
	var dnsNames []string
	var ips []net.IP
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			dnsNames = append(dnsNames, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	for _, n := range req.DNSNames {
		if !slices.Contains(dnsNames, n) {
			return fmt.Errorf("DNS name %q is not one of the Node's addresses", n)
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return fmt.Errorf("IP %s is not one of the Node's addresses", ip)
		}
	}
	return nil
}
