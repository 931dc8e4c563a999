package approver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// csrRequest is a PEM certificate request for tmpl.
func csrRequest(t *testing.T, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// nodeRequest is the request nodelet makes for node name.
func nodeRequest(t *testing.T, name string) []byte {
	return csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}})
}

var clientUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

// csrOf is a pending CSR to the node client signer, created at minute
// created.
func csrOf(name string, request []byte, user string, groups []string, created int) certificatesv1.CertificateSigningRequest {
	return certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC))},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: clientUsages, Username: user, Groups: groups,
		},
	}
}

func withCondition(csr certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequest {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue})
	return csr
}

// tokenGroups are the groups the API server gives a bootstrap token of
// node name.
func tokenGroups(name string) []string {
	return append([]string{"system:bootstrappers"}, append(TokenGroups(name), "system:authenticated")...)
}

func TestDecide(t *testing.T) {
	const token = "system:bootstrap:abcdef"
	const dotted = "worker-1.example.com"
	nodeGroups := []string{"system:nodes", "system:authenticated"}
	a := nodeRequest(t, "a")
	b := nodeRequest(t, "b")
	approvedA := withCondition(csrOf("first", a, token, tokenGroups("a"), 0), certificatesv1.CertificateApproved)

	cases := []struct {
		name       string
		csr        certificatesv1.CertificateSigningRequest
		modify     func(*certificatesv1.CertificateSigningRequest)
		others     []certificatesv1.CertificateSigningRequest
		want       Verdict
		wantReason string
	}{
		{name: "right name", csr: csrOf("c", a, token, tokenGroups("a"), 1), want: Approve, wantReason: ReasonAutoApproved},
		{name: "RSA usages with key encipherment", csr: csrOf("c", a, token, tokenGroups("a"), 1), modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
		}, want: Approve, wantReason: ReasonAutoApproved},
		{name: "other name", csr: csrOf("c", b, token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonNodeNameMismatch},
		{name: "dotted name bound by its hash", csr: csrOf("c", nodeRequest(t, dotted), token, tokenGroups(dotted), 1), want: Approve, wantReason: ReasonAutoApproved},
		{name: "dotted name, token of another dotted name", csr: csrOf("c", nodeRequest(t, "worker-2.example.com"), token, tokenGroups(dotted), 1), want: Deny, wantReason: ReasonNodeNameMismatch},
		{name: "second CSR after the first was approved", csr: csrOf("c", a, token, tokenGroups("a"), 1), others: []certificatesv1.CertificateSigningRequest{approvedA}, want: Deny, wantReason: ReasonTokenAlreadyUsed},
		{name: "second CSR while an earlier valid one waits", csr: csrOf("c", a, token, tokenGroups("a"), 1), others: []certificatesv1.CertificateSigningRequest{csrOf("first", a, token, tokenGroups("a"), 0)}, want: Deny, wantReason: ReasonTokenAlreadyUsed},
		{name: "earliest of two waiting is approved", csr: csrOf("c", a, token, tokenGroups("a"), 0), others: []certificatesv1.CertificateSigningRequest{csrOf("later", a, token, tokenGroups("a"), 1)}, want: Approve, wantReason: ReasonAutoApproved},
		{name: "earlier request for another node does not count", csr: csrOf("c", a, token, tokenGroups("a"), 1), others: []certificatesv1.CertificateSigningRequest{
			withCondition(csrOf("first", b, token, tokenGroups("a"), 0), certificatesv1.CertificateDenied), csrOf("waiting", b, token, tokenGroups("a"), 0),
		}, want: Approve, wantReason: ReasonAutoApproved},
		{name: "approved CSR of another token does not count", csr: csrOf("c", a, token, tokenGroups("a"), 1), others: []certificatesv1.CertificateSigningRequest{
			withCondition(csrOf("first", a, "system:bootstrap:ghijkl", tokenGroups("a"), 0), certificatesv1.CertificateApproved),
		}, want: Approve, wantReason: ReasonAutoApproved},
		{name: "the CSR itself in the list", csr: csrOf("c", a, token, tokenGroups("a"), 1), others: []certificatesv1.CertificateSigningRequest{csrOf("c", a, token, tokenGroups("a"), 1)}, want: Approve, wantReason: ReasonAutoApproved},
		{name: "wrong O", csr: csrOf("c", csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes", "system:masters"}}}), token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "extra subject attribute", csr: csrOf("c", csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}, OrganizationalUnit: []string{"x"}}}), token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "no O", csr: csrOf("c", csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a"}}), token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "CN not a node", csr: csrOf("c", csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:nodes"}}}), token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "invalid node name", csr: csrOf("c", nodeRequest(t, "A_b"), token, tokenGroups("A_b"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "extra DNS SAN", csr: csrOf("c", csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}, DNSNames: []string{"a"}}), token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "extra IP SAN", csr: csrOf("c", csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}), token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "server auth usage", csr: csrOf("c", a, token, tokenGroups("a"), 1), modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
		}, want: Deny, wantReason: ReasonInvalidRequest},
		{name: "unparsable request", csr: csrOf("c", []byte("garbage"), token, tokenGroups("a"), 1), want: Deny, wantReason: ReasonInvalidRequest},
		{name: "token bound to no node", csr: csrOf("c", a, token, []string{"system:bootstrappers", BootstrappersGroup}, 1), want: Deny, wantReason: ReasonNoNodeBinding},
		{name: "token bound to two nodes", csr: csrOf("c", a, token, append(tokenGroups("a"), NodeGroup("b")), 1), want: Deny, wantReason: ReasonNoNodeBinding},
		{name: "renewal by the node itself", csr: csrOf("c", a, "system:node:a", nodeGroups, 1), others: []certificatesv1.CertificateSigningRequest{
			withCondition(csrOf("earlier", a, "system:node:a", nodeGroups, 0), certificatesv1.CertificateApproved),
		}, want: Approve, wantReason: ReasonAutoApproved},
		{name: "renewal by a dotted node itself", csr: csrOf("c", nodeRequest(t, dotted), "system:node:"+dotted, nodeGroups, 1), want: Approve, wantReason: ReasonAutoApproved},
		{name: "renewal for another node", csr: csrOf("c", b, "system:node:a", nodeGroups, 1), want: Ignore},
		{name: "renewal with a SAN", csr: csrOf("c", csrRequest(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}, DNSNames: []string{"a"}}), "system:node:a", nodeGroups, 1), want: Ignore},
		{name: "node user without the nodes group", csr: csrOf("c", a, "system:node:a", []string{"system:authenticated"}, 1), want: Ignore},
		{name: "not a nodelet bootstrapper", csr: csrOf("c", b, token, []string{"system:bootstrappers", "system:authenticated"}, 1), want: Ignore},
		{name: "nodelet group on a user that is not a token", csr: csrOf("c", b, "alice", tokenGroups("a"), 1), want: Ignore},
		{name: "other signer", csr: csrOf("c", b, token, tokenGroups("a"), 1), modify: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeletServingSignerName
		}, want: Ignore},
		{name: "already approved", csr: approvedA, want: Ignore},
		{name: "already denied", csr: withCondition(csrOf("c", b, token, tokenGroups("a"), 1), certificatesv1.CertificateDenied), want: Ignore},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr := tc.csr.DeepCopy()
			if tc.modify != nil {
				tc.modify(csr)
			}
			got := Decide(csr, tc.others)
			if got.Verdict != tc.want || got.Reason != tc.wantReason {
				t.Fatalf("Decide = %v %q (%s), want %v %q", got.Verdict, got.Reason, got.Message, tc.want, tc.wantReason)
			}
			if got.Verdict != Ignore && got.Message == "" {
				t.Error("no message")
			}
			wantPermission := ""
			if got.Verdict == Approve {
				wantPermission = SubresourceSelfNodeClient
				if strings.HasPrefix(csr.Spec.Username, bootstrapUserPrefix) {
					wantPermission = SubresourceNodeClient
				}
			}
			if got.Permission != wantPermission {
				t.Errorf("permission %q, want %q", got.Permission, wantPermission)
			}
		})
	}
}

func TestNodeGroup(t *testing.T) {
	longest := strings.Repeat("a", 256-len("nodelet:node:"))
	cases := []struct {
		name, want string
	}{
		{"worker-1", "system:bootstrappers:nodelet:node:worker-1"},
		{"worker-1-nodelet", "system:bootstrappers:nodelet:node:worker-1-nodelet"},
		// printf worker-1.example.com | sha256sum, as hack/bootstrap-token.sh computes it
		{"worker-1.example.com", "system:bootstrappers:nodelet:node-sha256:357dd4545db034f7341c7764d46e035ea11ed9b2d070b0a887bceeb4b76a2b64"},
		{longest, "system:bootstrappers:nodelet:node:" + longest},
		{longest + "a", ""},
	}
	for _, tc := range cases {
		got := NodeGroup(tc.name)
		if !validBootstrapGroup(got) {
			t.Errorf("NodeGroup(%q) = %q, which the API server refuses as a bootstrap token group", tc.name, got)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("NodeGroup(%q) = %q, want %q", tc.name, got, tc.want)
		}
		if tc.want == "" && !strings.HasPrefix(got, nodeHashGroupPrefix) {
			t.Errorf("NodeGroup(%q) = %q, want the hash form", tc.name, got)
		}
	}
}
