package approver

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// ServingApprovalLabel is the label that, with the value
	// ServingApprovalValue on a Node, lets the approver approve that
	// node's serving certificates. An admin sets it: NodeRestriction
	// forbids a node to set a label with the node-restriction.kubernetes.io/
	// prefix on its own Node, when it registers as later, so a node cannot
	// opt itself in.
	ServingApprovalLabel = "node-restriction.kubernetes.io/nodelet-serving-certificate"
	// ServingApprovalValue is ServingApprovalLabel's value that opts a
	// Node in.
	ServingApprovalValue = "auto-approve"
)

// servingUsages are the usage sets of a node serving certificate: RSA
// keys add key encipherment.
var servingUsages = [][]certificatesv1.KeyUsage{
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
}

// ServingFacts is what DecideServing needs besides the request: the
// policy, and what the cluster says about the requester's Node and the
// addresses others use.
type ServingFacts struct {
	// Policy is the operator's configuration.
	Policy ServingPolicy
	// Node is the requester's Node; nil when there is none.
	Node *corev1.Node
	// ServiceCIDRs are the ranges of the cluster's ServiceCIDR objects.
	ServiceCIDRs []netip.Prefix
	// ServiceIPs are the ClusterIPs of Service default/kubernetes.
	ServiceIPs []netip.Addr
	// OtherNodes maps the addressKey of an address that a Node other than
	// the requester's reports to that Node's name. It needs to hold at
	// least the request's names.
	OtherNodes map[string]string
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

// ServingApproved reports whether an admin opted node in to the
// approval of its serving certificates (ServingApprovalLabel).
func ServingApproved(node *corev1.Node) bool {
	return node != nil && node.Labels[ServingApprovalLabel] == ServingApprovalValue
}

// DecideServing decides on a request to kubernetes.io/kubelet-serving.
// It approves, subject to the requester's permission
// SubresourceSelfNodeServing, a request made by system:node:<name> in
// system:nodes for CN=system:node:<name>, O=system:nodes, with exactly the
// serving usages, at least one DNS name or IP and no email or URI, when
// Node <name> carries ServingApprovalLabel and every name of the request
// is
//
//   - one of the Node's own addresses (its Hostname, InternalDNS or
//     ExternalDNS for a DNS name, its InternalIP or ExternalIP for an IP),
//   - allowed by the policy: a DNS name matching one of its patterns, an
//     IP in one of its CIDRs,
//   - never one that no node may have (forbiddenDNSName, forbiddenIP: a
//     wildcard, the API server's Service names and ClusterIP, a Service
//     IP, cluster DNS names), and
//   - not an address that another Node reports.
//
// Anything else is left alone, to an admin; the Message of such an
// Ignore says why, when the request is a node's serving request.
func DecideServing(csr *certificatesv1.CertificateSigningRequest, facts ServingFacts) Decision {
	name := ServingNodeName(csr)
	if name == "" {
		return Decision{}
	}
	if err := checkServing(csr, name, facts); err != nil {
		return Decision{Message: fmt.Sprintf("Not approving the serving certificate of node %s: %v", name, err)}
	}
	return Decision{Verdict: Approve, Reason: ReasonAutoApproved, Permission: SubresourceSelfNodeServing,
		Message: fmt.Sprintf("Auto approving the serving certificate of nodelet node %s for names its operator allows", name)}
}

// checkServing returns why csr, a serving request of node name, is not
// to be approved, or nil.
func checkServing(csr *certificatesv1.CertificateSigningRequest, name string, facts ServingFacts) error {
	node := facts.Node
	if node == nil || node.Name != name {
		return fmt.Errorf("there is no Node %s", name)
	}
	if !ServingApproved(node) {
		return fmt.Errorf("its Node lacks the label %s=%s that an admin sets", ServingApprovalLabel, ServingApprovalValue)
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return err
	}
	if req.Subject.CommonName != csr.Spec.Username || !slices.Equal(req.Subject.Organization, []string{nodesGroup}) || !oneCNOneO(req.Subject) {
		return fmt.Errorf("subject %q is not exactly the requester's node subject", req.Subject)
	}
	if len(req.EmailAddresses)+len(req.URIs) > 0 || len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return fmt.Errorf("the request names emails or URIs, or no DNS name nor IP")
	}
	if !slices.ContainsFunc(servingUsages, func(want []certificatesv1.KeyUsage) bool { return sameUsages(csr.Spec.Usages, want) }) {
		return fmt.Errorf("usages %q are not a serving certificate's", csr.Spec.Usages)
	}
	ownDNS, ownIPs := map[string]bool{}, map[string]bool{}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			ownDNS[addressKey(a.Address)] = true
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ownIPs[addressKey(a.Address)] = true
		}
	}
	for _, n := range req.DNSNames {
		if why := forbiddenDNSName(n); why != "" {
			return fmt.Errorf("DNS name %q is never approved: %s", n, why)
		}
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return fmt.Errorf("DNS name %q is not a lower-case DNS name: %s", n, strings.Join(errs, "; "))
		}
		if !slices.ContainsFunc(facts.Policy.DNSNamePatterns, func(p string) bool { return matchesDNSNamePattern(p, n) }) {
			return fmt.Errorf("DNS name %q matches none of the configured dnsNamePatterns", n)
		}
		if !ownDNS[n] {
			return fmt.Errorf("DNS name %q is not one of the Node's DNS addresses", n)
		}
		if other := facts.OtherNodes[n]; other != "" {
			return fmt.Errorf("DNS name %q is an address of Node %s", n, other)
		}
	}
	serviceCIDRs := slices.Concat(facts.Policy.ServiceCIDRs, facts.ServiceCIDRs)
	for _, raw := range req.IPAddresses {
		ip, ok := netip.AddrFromSlice(raw)
		if !ok {
			return fmt.Errorf("IP %v is not an IP", raw)
		}
		ip = ip.Unmap()
		if why := forbiddenIP(ip, serviceCIDRs, facts.ServiceIPs); why != "" {
			return fmt.Errorf("IP %s is never approved: %s", ip, why)
		}
		if !slices.ContainsFunc(facts.Policy.IPCIDRs, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			return fmt.Errorf("IP %s is in none of the configured ipCIDRs", ip)
		}
		key := ip.String()
		if !ownIPs[key] {
			return fmt.Errorf("IP %s is not one of the Node's IP addresses", ip)
		}
		if other := facts.OtherNodes[key]; other != "" {
			return fmt.Errorf("IP %s is an address of Node %s", ip, other)
		}
	}
	return nil
}

// ServingNames returns the addressKeys of the DNS names and IPs of a
// serving request (none when it does not parse): the addresses whose
// other owners ServingFacts.OtherNodes needs.
func ServingNames(csr *certificatesv1.CertificateSigningRequest) []string {
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range req.DNSNames {
		out = append(out, addressKey(n))
	}
	for _, raw := range req.IPAddresses {
		if ip, ok := netip.AddrFromSlice(raw); ok {
			out = append(out, ip.Unmap().String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
