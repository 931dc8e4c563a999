package approver

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net"
	"net/netip"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testPolicy allows the names of the nodes in TestDecideServing, and 10/8,
// which holds the service CIDR 10.96.0.0/12 of the facts but not of the
// policy: the ServiceCIDR objects must keep those out.
func testPolicy(t *testing.T) ServingPolicy {
	t.Helper()
	p, errs := ServingCertificates{
		DNSNamePatterns: []string{"a", "*.nodes.example.com"},
		IPCIDRs:         []string{"10.0.0.0/8", "fd00::/64"},
	}.Policy(nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return p
}

func TestDecideServing(t *testing.T) {
	nodeGroups := []string{"system:nodes", "system:authenticated"}
	subject := pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}
	request := func(dns []string, ips ...string) []byte {
		tmpl := &x509.CertificateRequest{Subject: subject, DNSNames: dns}
		for _, ip := range ips {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
		}
		return csrRequest(t, tmpl)
	}
	serving := func(request []byte) certificatesv1.CertificateSigningRequest {
		c := csrOf("s", request, "system:node:a", nodeGroups, 0)
		c.Spec.SignerName = certificatesv1.KubeletServingSignerName
		c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
		return c
	}
	own := serving(request([]string{"a", "a.nodes.example.com"}, "10.1.0.1"))
	// Node a reports, besides its own names, every name a node might
	// claim, so that only the rules under test refuse them.
	nodeA := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{ServingApprovalLabel: ServingApprovalValue}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: "a"},
			{Type: corev1.NodeInternalDNS, Address: "a.nodes.example.com"},
			{Type: corev1.NodeInternalIP, Address: "10.1.0.1"},
			{Type: corev1.NodeExternalIP, Address: "fd00::1"},
			{Type: corev1.NodeInternalDNS, Address: "b.nodes.example.com"},
			{Type: corev1.NodeInternalDNS, Address: "*.nodes.example.com"},
			{Type: corev1.NodeInternalDNS, Address: "kubernetes.default.svc"},
			{Type: corev1.NodeInternalDNS, Address: "c.nodes.example.com"},
			{Type: corev1.NodeInternalIP, Address: "10.96.0.1"},
			{Type: corev1.NodeInternalIP, Address: "10.100.0.7"},
			{Type: corev1.NodeInternalIP, Address: "10.1.0.2"},
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeInternalIP, Address: "169.254.169.254"},
			{Type: corev1.NodeInternalIP, Address: "192.168.0.1"},
		}},
	}
	facts := func(node *corev1.Node) ServingFacts {
		return ServingFacts{
			Policy:       testPolicy(t),
			Node:         node,
			ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
			ServiceIPs:   []netip.Addr{netip.MustParseAddr("10.96.0.1")},
			OtherNodes:   map[string]string{"b.nodes.example.com": "b", "10.1.0.2": "b"},
		}
	}
	selfLabelled := nodeA.DeepCopy()
	selfLabelled.Labels = map[string]string{"nodelet.io/agent": "nodelet"}
	otherValue := nodeA.DeepCopy()
	otherValue.Labels[ServingApprovalLabel] = "true"

	cases := []struct {
		name   string
		csr    certificatesv1.CertificateSigningRequest
		modify func(*certificatesv1.CertificateSigningRequest)
		facts  ServingFacts
		want   Verdict
		why    string // in the message of an Ignore
	}{
		{name: "own names the policy allows", csr: own, facts: facts(nodeA), want: Approve},
		{name: "IPv6", csr: serving(request([]string{"a"}, "fd00::1")), facts: facts(nodeA), want: Approve},
		{name: "RSA usages", csr: own, modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
		}, facts: facts(nodeA), want: Approve},

		// What no configuration lets through.
		{name: "wildcard the Node reports and a pattern matches", csr: serving(request([]string{"a", "*.nodes.example.com"})), facts: facts(nodeA), why: "a wildcard"},
		{name: "the API server's Service name", csr: serving(request([]string{"kubernetes.default.svc"})), facts: facts(nodeA), why: "API server's Service"},
		{name: "the API server's ClusterIP in a CIDR the policy allows", csr: serving(request([]string{"a"}, "10.96.0.1")), facts: facts(nodeA), why: "ClusterIP"},
		{name: "the ClusterIP as an IPv4-mapped IPv6 address", csr: serving(request([]string{"a"}, "::ffff:10.96.0.1")), facts: facts(nodeA), why: "ClusterIP"},
		{name: "a Service IP of a ServiceCIDR", csr: serving(request([]string{"a"}, "10.100.0.7")), facts: facts(nodeA), why: "service CIDR"},
		{name: "another Node's IP", csr: serving(request([]string{"a"}, "10.1.0.2")), facts: facts(nodeA), why: "address of Node b"},
		{name: "another Node's DNS name", csr: serving(request([]string{"a", "b.nodes.example.com"})), facts: facts(nodeA), why: "address of Node b"},
		{name: "loopback", csr: serving(request([]string{"a"}, "127.0.0.1")), facts: facts(nodeA), why: "loopback"},
		{name: "link-local metadata address", csr: serving(request([]string{"a"}, "169.254.169.254")), facts: facts(nodeA), why: "link-local"},

		// The policy.
		{name: "an IP outside the configured CIDRs", csr: serving(request([]string{"a"}, "192.168.0.1")), facts: facts(nodeA), why: "none of the configured ipCIDRs"},
		{name: "a DNS name no pattern matches", csr: serving(request([]string{"a", "a.example.org"})), facts: facts(nodeA), why: "none of the configured dnsNamePatterns"},
		{name: "empty policy", csr: own, facts: ServingFacts{Node: nodeA}, why: "none of the configured"},
		{name: "upper case", csr: serving(request([]string{"A"})), facts: facts(nodeA), why: "not a lower-case DNS name"},
		{name: "trailing dot", csr: serving(request([]string{"a."})), facts: facts(nodeA), why: "not a lower-case DNS name"},

		// The node's own addresses.
		{name: "a name the Node does not report", csr: serving(request([]string{"d.nodes.example.com"})), facts: facts(nodeA), why: "not one of the Node's DNS addresses"},
		{name: "an IP the Node does not report", csr: serving(request([]string{"a"}, "10.1.0.9")), facts: facts(nodeA), why: "not one of the Node's IP addresses"},
		{name: "a DNS address claimed as an IP", csr: serving(request(nil, "10.1.0.1")), modify: nil, facts: func() ServingFacts {
			f := facts(nodeA)
			f.Node = nodeA.DeepCopy()
			f.Node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "10.1.0.1"}}
			return f
		}(), why: "not one of the Node's IP addresses"},

		// The opt-in.
		{name: "a Node that labelled itself as nodelet's", csr: own, facts: facts(selfLabelled), why: ServingApprovalLabel},
		{name: "another value of the label", csr: own, facts: facts(otherValue), why: ServingApprovalLabel},
		{name: "no Node", csr: own, facts: facts(nil), why: "no Node"},
		{name: "another Node", csr: own, facts: func() ServingFacts {
			f := facts(nodeA.DeepCopy())
			f.Node.Name = "b"
			return f
		}(), why: "no Node a"},

		// The requester's identity and the request's shape.
		{name: "another node's subject", csr: own, modify: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "system:node:b" }, facts: facts(nodeA), why: "no Node b"},
		{name: "subject with an OU", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}, OrganizationalUnit: []string{"x"}}, DNSNames: []string{"a"}})), facts: facts(nodeA), why: "subject"},
		{name: "subject with two organizations", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes", "system:masters"}}, DNSNames: []string{"a"}})), facts: facts(nodeA), why: "subject"},
		{name: "subject with a second common name", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"},
			ExtraNames: []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "system:node:b"}}}, DNSNames: []string{"a"}})), facts: facts(nodeA), why: "subject"},
		{name: "no names", csr: serving(request(nil)), facts: facts(nodeA), why: "no DNS name nor IP"},
		{name: "an email", csr: serving(csrRequest(t, &x509.CertificateRequest{Subject: subject, DNSNames: []string{"a"}, EmailAddresses: []string{"x@example.com"}})), facts: facts(nodeA), why: "emails"},
		{name: "client usage", csr: own, modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
		}, facts: facts(nodeA), why: "usages"},
		{name: "no digital signature", csr: own, modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}
		}, facts: facts(nodeA), why: "usages"},
		{name: "unparsable request", csr: serving([]byte("garbage")), facts: facts(nodeA), why: "not a PEM"},

		// Not the approver's to decide.
		{name: "not a node", csr: own, modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username, c.Spec.Groups = "system:bootstrap:abcdef", tokenGroups("a")
		}, facts: facts(nodeA)},
		{name: "node user without the nodes group", csr: own, modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Groups = []string{"system:authenticated"}
		}, facts: facts(nodeA)},
		{name: "client signer", csr: own, modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
		}, facts: facts(nodeA)},
		{name: "already approved", csr: withCondition(own, certificatesv1.CertificateApproved), facts: facts(nodeA)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr := tc.csr.DeepCopy()
			if tc.modify != nil {
				tc.modify(csr)
			}
			got := DecideServing(csr, tc.facts)
			if got.Verdict != tc.want {
				t.Fatalf("DecideServing = %v %q (%s), want %v", got.Verdict, got.Reason, got.Message, tc.want)
			}
			switch {
			case got.Verdict == Approve:
				if got.Reason != ReasonAutoApproved || got.Permission != SubresourceSelfNodeServing {
					t.Errorf("reason %q, permission %q", got.Reason, got.Permission)
				}
			case !strings.Contains(got.Message, tc.why):
				t.Errorf("message %q does not say %q", got.Message, tc.why)
			case tc.why == "" && got.Message != "":
				t.Errorf("message %q for a request that is not the approver's", got.Message)
			}
		})
	}
}

func TestForbiddenDNSName(t *testing.T) {
	cases := []struct {
		name      string
		forbidden bool
	}{
		{"kubernetes", true},
		{"kubernetes.default", true},
		{"kubernetes.default.svc", true},
		{"kubernetes.default.svc.cluster.local", true},
		{"kubernetes.default.svc.example", true},
		{"*", true},
		{"*.nodes.example.com", true},
		{"a.*.example.com", true},
		{"a*", true},
		{"my-service.my-namespace.svc", true},
		{"my-service.my-namespace.svc.cluster.local", true},
		{"host.sub.my-namespace.svc.cluster.local", true},
		{"10-1-0-1.my-namespace.pod.cluster.local", true},
		{"kubernetes.example.com", false},
		{"kubernetes-default-svc", false},
		{"svc.example.com", false},
		{"a.svc", false},
		{"node-1", false},
		{"node-1.nodes.example.com", false},
	}
	for _, tc := range cases {
		if got := forbiddenDNSName(tc.name) != ""; got != tc.forbidden {
			t.Errorf("forbiddenDNSName(%q) = %v, want %v", tc.name, got, tc.forbidden)
		}
	}
}

func TestForbiddenIP(t *testing.T) {
	serviceCIDRs := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}
	serviceIPs := []netip.Addr{netip.MustParseAddr("172.20.0.1")}
	cases := []struct {
		ip        string
		forbidden bool
	}{
		{"10.96.0.1", true},
		{"10.111.255.255", true},
		{"::ffff:10.96.0.10", true},
		{"fd00:96::1", true},
		{"172.20.0.1", true},
		{"::ffff:172.20.0.1", true},
		{"127.0.0.1", true},
		{"::1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"224.0.0.1", true},
		{"ff02::1", true},
		{"10.95.255.255", false},
		{"10.112.0.0", false},
		{"192.168.1.10", false},
		{"fd00:97::1", false},
		{"2001:db8::1", false},
	}
	for _, tc := range cases {
		if got := forbiddenIP(netip.MustParseAddr(tc.ip), serviceCIDRs, serviceIPs) != ""; got != tc.forbidden {
			t.Errorf("forbiddenIP(%s) = %v, want %v", tc.ip, got, tc.forbidden)
		}
	}
	if forbiddenIP(netip.Addr{}, nil, nil) == "" {
		t.Error("the zero Addr is allowed")
	}
}

func TestMatchesDNSNamePattern(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"node-1.example.com", "node-1.example.com", true},
		{"node-1.example.com", "node-2.example.com", false},
		{"node-1.example.com", "x.node-1.example.com", false},
		{"*.nodes.example.com", "a.nodes.example.com", true},
		{"*.nodes.example.com", "a.b.nodes.example.com", false},
		{"*.nodes.example.com", "nodes.example.com", false},
		{"*.nodes.example.com", ".nodes.example.com", false},
		{"*.nodes.example.com", "a.nodes.example.com.evil.com", false},
		{"*.nodes.example.com", "anodes.example.com", false},
	}
	for _, tc := range cases {
		if got := matchesDNSNamePattern(tc.pattern, tc.name); got != tc.want {
			t.Errorf("matchesDNSNamePattern(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestAddressKey(t *testing.T) {
	cases := map[string]string{
		"10.0.0.1":         "10.0.0.1",
		"::ffff:10.0.0.1":  "10.0.0.1",
		"FD00::0001":       "fd00::1",
		"Node-1.Example.":  "node-1.example",
		"node-1":           "node-1",
		"fe80::1%eth0":     "fe80::1",
		"not an address 1": "not an address 1",
	}
	for in, want := range cases {
		if got := addressKey(in); got != want {
			t.Errorf("addressKey(%q) = %q, want %q", in, got, want)
		}
	}
}
