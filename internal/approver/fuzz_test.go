package approver

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fuzz targets' fixture: node a, whose Node reports every name a
// request holds, so that only the policy and the rules that no policy
// lifts stand between a request and its approval.
const (
	fuzzNode        = "a"
	fuzzOtherNodeIP = "10.1.0.2"
	fuzzClusterIP   = "10.96.0.1"
)

var fuzzServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")

// fuzzKey signs the requests the targets build; made once, since a key
// per input would be most of the time spent.
var fuzzKey = sync.OnceValue(func() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
})

// fuzzInput is one input of FuzzCSRDecoding: a raw spec.request, and the
// parts of a request the target builds and signs itself, so that the
// fuzzer reaches the decisions past the signature check.
type fuzzInput struct {
	raw    []byte
	cn, o  string
	dns    string // DNS names, one per line
	ips    []byte // IPs, each a length byte (4 or 16) and its bytes
	usages uint8  // a bit per usage of fuzzUsages
}

// fuzzUsages are the usages bits of fuzzInput.usages stand for.
var fuzzUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
	certificatesv1.UsageClientAuth, certificatesv1.UsageCertSign, certificatesv1.UsageAny,
}

func fuzzSeeds(t testing.TB) []fuzzInput {
	pemOf := func(tmpl *x509.CertificateRequest) []byte {
		der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, fuzzKey())
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	subject := pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}
	ip := func(s ...string) []byte {
		var b []byte
		for _, a := range s {
			p := net.ParseIP(a)
			if v4 := p.To4(); v4 != nil && !strings.Contains(a, ":") {
				p = v4
			}
			b = append(append(b, byte(len(p))), p...)
		}
		return b
	}
	const serving = 1<<0 | 1<<2
	return []fuzzInput{
		{raw: pemOf(&x509.CertificateRequest{Subject: subject, DNSNames: []string{"a", "a.nodes.example.com"}, IPAddresses: []net.IP{net.ParseIP("10.1.0.1")}}),
			cn: "system:node:a", o: "system:nodes", dns: "a\na.nodes.example.com", ips: ip("10.1.0.1"), usages: serving},
		{raw: pemOf(&x509.CertificateRequest{Subject: subject}), cn: "system:node:a", o: "system:nodes", usages: 1<<0 | 1<<3},
		{raw: []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"),
			cn: "system:node:a", o: "system:nodes", dns: "kubernetes.default.svc\n*.nodes.example.com\nb.nodes.example.com", usages: serving},
		{raw: nil, cn: "system:node:a", o: "system:nodes", ips: ip(fuzzClusterIP, "::ffff:"+fuzzClusterIP, fuzzOtherNodeIP, "127.0.0.1", "fd00::1"), usages: serving | 1<<1},
		{raw: []byte("garbage"), cn: "system:node:b", o: "system:masters", dns: "A.NODES.EXAMPLE.COM.\nkubernetes.default.svc.cluster.local", usages: 0xff},
	}
}

// FuzzCSRDecoding feeds the approver's decisions requests it did not make:
// a raw spec.request, and signed requests built from fuzzed subjects,
// names and usages. Nothing may panic, and whatever is approved must hold
// only what the policy allows and never a name no node may have, checked
// here without the approver's own helpers.
func FuzzCSRDecoding(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.raw, s.cn, s.o, s.dns, s.ips, s.usages)
	}
	f.Fuzz(func(t *testing.T, raw []byte, cn, o, dns string, ips []byte, usages uint8) {
		checkCSRDecoding(t, fuzzInput{raw: raw, cn: cn, o: o, dns: dns, ips: ips, usages: usages})
	})
}

// TestCSRDecodingMutations runs FuzzCSRDecoding's checks on inputs
// mutated from its seeds by a fixed pseudo-random sequence: what make
// test runs of it (make fuzz runs the coverage-guided fuzzer).
func TestCSRDecodingMutations(t *testing.T) {
	seeds := fuzzSeeds(t)
	r := mrand.New(mrand.NewPCG(1, 2))
	flip := func(b []byte) []byte {
		b = bytes.Clone(b)
		for range 1 + r.IntN(3) {
			if len(b) == 0 || r.IntN(4) == 0 {
				b = append(b, byte(r.UintN(256)))
				continue
			}
			b[r.IntN(len(b))] ^= 1 << r.UintN(8)
		}
		return b
	}
	for i := range 2000 {
		in := seeds[r.IntN(len(seeds))]
		switch r.IntN(6) {
		case 0:
			in.raw = flip(in.raw)
		case 1:
			in.cn = string(flip([]byte(in.cn)))
		case 2:
			in.o = string(flip([]byte(in.o)))
		case 3:
			in.dns = string(flip([]byte(in.dns)))
		case 4:
			in.ips = flip(in.ips)
		case 5:
			in.usages = uint8(r.UintN(256))
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkCSRDecoding(t, in) })
	}
}

func checkCSRDecoding(t *testing.T, in fuzzInput) {
	var usages []certificatesv1.KeyUsage
	for i, u := range fuzzUsages {
		if in.usages&(1<<i) != 0 {
			usages = append(usages, u)
		}
	}
	requests := [][]byte{in.raw}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: in.cn}}
	if in.o != "" {
		tmpl.Subject.Organization = strings.Split(in.o, ",")
	}
	if in.dns != "" {
		tmpl.DNSNames = strings.Split(in.dns, "\n")
	}
	for b := in.ips; len(b) > 0; {
		n := int(b[0])
		if n != 4 && n != 16 || len(b) < 1+n {
			break
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(b[1:1+n]))
		b = b[1+n:]
	}
	if der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, fuzzKey()); err == nil {
		requests = append(requests, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	}
	for _, request := range requests {
		checkServingDecision(t, request, usages)
		checkClientDecision(t, request, usages)
	}
}

// checkServingDecision decides on request as node a's serving request,
// with a Node that reports all its names, and checks an approval.
func checkServingDecision(t *testing.T, request []byte, usages []certificatesv1.KeyUsage) {
	csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: request, SignerName: certificatesv1.KubeletServingSignerName, Usages: usages,
		Username: "system:node:" + fuzzNode, Groups: []string{"system:nodes", "system:authenticated"},
	}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fuzzNode, Labels: map[string]string{ServingApprovalLabel: ServingApprovalValue}}}
	req, parseErr := parseRequest(request)
	if parseErr == nil {
		for _, n := range req.DNSNames {
			node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: n})
		}
		for _, ip := range req.IPAddresses {
			node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
		}
	}
	policy, errs := ServingCertificates{DNSNamePatterns: []string{fuzzNode, "*.nodes.example.com"}, IPCIDRs: []string{"10.0.0.0/8", "fd00::/64"}}.Policy(nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	d := DecideServing(csr, ServingFacts{
		Policy: policy, Node: node,
		ServiceCIDRs: []netip.Prefix{fuzzServiceCIDR}, ServiceIPs: []netip.Addr{netip.MustParseAddr(fuzzClusterIP)},
		OtherNodes: map[string]string{fuzzOtherNodeIP: "b"},
	})
	if d.Verdict == Deny {
		t.Fatalf("a serving request was denied: %+v", d)
	}
	if d.Verdict != Approve {
		return
	}
	if parseErr != nil {
		t.Fatalf("approved a request that does not parse (%v)", parseErr)
	}
	if req.Subject.CommonName != "system:node:"+fuzzNode || len(req.Subject.Names) != 2 {
		t.Fatalf("approved subject %q", req.Subject)
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 || len(req.EmailAddresses)+len(req.URIs) > 0 {
		t.Fatalf("approved names %q %v %q %v", req.DNSNames, req.IPAddresses, req.EmailAddresses, req.URIs)
	}
	for _, u := range usages {
		if u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageKeyEncipherment && u != certificatesv1.UsageServerAuth {
			t.Fatalf("approved usage %q", u)
		}
	}
	for _, n := range req.DNSNames {
		lower := strings.ToLower(n)
		if strings.Contains(n, "*") || lower == "kubernetes" || lower == "kubernetes.default" ||
			strings.HasPrefix(strings.TrimSuffix(lower, "."), "kubernetes.default.svc") {
			t.Fatalf("approved DNS name %q", n)
		}
		first, domain, _ := strings.Cut(n, ".")
		if n != fuzzNode && (domain != "nodes.example.com" || first == "") {
			t.Fatalf("approved DNS name %q, which the policy does not allow", n)
		}
	}
	for _, ip := range req.IPAddresses {
		v4 := ip.To4()
		if v4 == nil {
			if len(ip) != 16 || binary.BigEndian.Uint64(ip[:8]) != 0xfd00<<48 {
				t.Fatalf("approved IP %v, which the policy does not allow", ip)
			}
			continue
		}
		if v4[0] != 10 || v4[1]&0xf0 == 96 || ip.Equal(net.ParseIP(fuzzOtherNodeIP)) {
			t.Fatalf("approved IP %v: outside the policy, a Service IP, or another Node's", ip)
		}
	}
}

// checkClientDecision decides on request as a node client request of a
// bootstrap token bound to node a, and of node a itself, and checks an
// approval.
func checkClientDecision(t *testing.T, request []byte, usages []certificatesv1.KeyUsage) {
	for _, who := range []struct {
		user   string
		groups []string
	}{
		{"system:bootstrap:abcdef", append([]string{"system:bootstrappers"}, TokenGroups(fuzzNode)...)},
		{"system:node:" + fuzzNode, []string{"system:nodes"}},
	} {
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request: request, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Usages: usages,
				Username: who.user, Groups: who.groups,
			},
		}
		d := Decide(csr, nil)
		if d.Verdict != Approve {
			continue
		}
		req, err := parseRequest(request)
		if err != nil {
			t.Fatalf("approved a request that does not parse (%v)", err)
		}
		if req.Subject.CommonName != "system:node:"+fuzzNode || len(req.Subject.Names) != 2 ||
			len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != "system:nodes" {
			t.Fatalf("approved subject %q for %s", req.Subject, who.user)
		}
		if n := len(req.DNSNames) + len(req.IPAddresses) + len(req.EmailAddresses) + len(req.URIs); n > 0 {
			t.Fatalf("approved a client request with %d names", n)
		}
		if err := req.CheckSignature(); err != nil || req.PublicKey == nil {
			t.Fatalf("approved a request whose signature does not check: %v", err)
		}
	}
}
