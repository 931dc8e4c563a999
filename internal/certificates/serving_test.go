package certificates

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// servingPair makes a self-signed certificate for names valid from notBefore
// to notAfter, and returns it and its key in PEM.
func servingPair(t *testing.T, names SANs, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	return selfSignedPEM(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "test"},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		DNSNames:    names.DNSNames,
		IPAddresses: names.IPs,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

func writePair(t *testing.T, certFile, keyFile string, certPEM, keyPEM []byte) {
	t.Helper()
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func noAddresses() (SANs, bool) { return SANs{}, false }

func TestServingSANs(t *testing.T) {
	cases := []struct {
		name     string
		nodeName string
		nodeIP   string
		addrs    []corev1.NodeAddress
		wantDNS  []string
		wantIPs  []string
	}{
		{name: "name only", nodeName: "node-a", wantDNS: []string{"node-a"}},
		{name: "name and configured IP", nodeName: "node-a", nodeIP: "192.0.2.1",
			wantDNS: []string{"node-a"}, wantIPs: []string{"192.0.2.1"}},
		{name: "the Node's addresses, sorted and once each", nodeName: "node-a", nodeIP: "192.0.2.1",
			addrs: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "192.0.2.1"},
				{Type: corev1.NodeExternalIP, Address: "198.51.100.7"},
				{Type: corev1.NodeInternalIP, Address: "2001:db8::1"},
				{Type: corev1.NodeHostName, Address: "node-a"},
				{Type: corev1.NodeInternalDNS, Address: "node-a.internal"},
				{Type: corev1.NodeExternalDNS, Address: "a.example.com"},
			},
			wantDNS: []string{"a.example.com", "node-a", "node-a.internal"},
			wantIPs: []string{"192.0.2.1", "198.51.100.7", "2001:db8::1"}},
		{name: "a host name that is an IP is an IP", nodeName: "192.0.2.9",
			addrs:   []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "192.0.2.9"}},
			wantIPs: []string{"192.0.2.9"}},
		{name: "unknown address types are left out", nodeName: "node-a",
			addrs:   []corev1.NodeAddress{{Type: "Other", Address: "203.0.113.1"}},
			wantDNS: []string{"node-a"}},
		{name: "a bad nodeIP is a name no one asks for, not an IP", nodeName: "node-a", nodeIP: "",
			wantDNS: []string{"node-a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ServingSANs(tc.nodeName, tc.nodeIP, tc.addrs)
			g.Expect(got.DNSNames).To(Equal(tc.wantDNS))
			var ips []string
			for _, ip := range got.IPs {
				ips = append(ips, ip.String())
			}
			g.Expect(ips).To(Equal(tc.wantIPs))
			// The same names in another order are the same SANs: the
			// certificate manager compares requests with DeepEqual.
			reversed := append([]corev1.NodeAddress(nil), tc.addrs...)
			for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
				reversed[i], reversed[j] = reversed[j], reversed[i]
			}
			g.Expect(ServingSANs(tc.nodeName, tc.nodeIP, reversed)).To(Equal(got))
		})
	}
}

func TestRenewBefore(t *testing.T) {
	cases := []struct {
		lifetime, want time.Duration
	}{
		{365 * 24 * time.Hour, 30 * 24 * time.Hour},
		{100 * 24 * time.Hour, 20 * 24 * time.Hour},
		{time.Hour, 12 * time.Minute},
		{0, 0},
	}
	for _, tc := range cases {
		if got := renewBefore(tc.lifetime); got != tc.want {
			t.Errorf("renewBefore(%s) = %s, want %s", tc.lifetime, got, tc.want)
		}
	}
}

func TestSelfSignedRenewal(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	names := SANs{DNSNames: []string{"node-a"}, IPs: []net.IP{net.ParseIP("192.0.2.1").To4()}}
	cert := func(from, to time.Time, s SANs) *x509.Certificate {
		return &x509.Certificate{NotBefore: from, NotAfter: to, DNSNames: s.DNSNames, IPAddresses: s.IPs}
	}
	cases := []struct {
		name       string
		cert       *x509.Certificate
		want       SANs
		wantRenew  bool
		wantReason string
	}{
		{name: "none", want: names, wantRenew: true, wantReason: "there is no certificate"},
		{name: "fresh", cert: cert(now.Add(-time.Hour), now.Add(year), names), want: names},
		{name: "expired", cert: cert(now.Add(-year), now.Add(-time.Second), names), want: names,
			wantRenew: true, wantReason: "expired"},
		{name: "expires this instant", cert: cert(now.Add(-year), now, names), want: names,
			wantRenew: true, wantReason: "expired"},
		{name: "not yet valid", cert: cert(now.Add(time.Hour), now.Add(year), names), want: names,
			wantRenew: true, wantReason: "not valid before"},
		{name: "a year's certificate 29 days before expiry", cert: cert(now.Add(-year+29*24*time.Hour), now.Add(29*24*time.Hour), names),
			want: names, wantRenew: true, wantReason: "expires at"},
		{name: "a year's certificate 31 days before expiry", cert: cert(now.Add(-year+31*24*time.Hour), now.Add(31*24*time.Hour), names),
			want: names},
		{name: "an hour's certificate in its last fifth", cert: cert(now.Add(-50*time.Minute), now.Add(10*time.Minute), names),
			want: names, wantRenew: true, wantReason: "expires at"},
		{name: "an hour's certificate before its last fifth", cert: cert(now.Add(-40*time.Minute), now.Add(20*time.Minute), names),
			want: names},
		{name: "the node has a new IP", cert: cert(now.Add(-time.Hour), now.Add(year), names),
			want: SANs{DNSNames: names.DNSNames, IPs: []net.IP{net.ParseIP("192.0.2.2")}}, wantRenew: true, wantReason: "192.0.2.2"},
		{name: "the node has a new name", cert: cert(now.Add(-time.Hour), now.Add(year), names),
			want: SANs{DNSNames: []string{"node-b"}, IPs: names.IPs}, wantRenew: true, wantReason: "node-b"},
		{name: "a certificate for more names is kept", cert: cert(now.Add(-time.Hour), now.Add(year),
			SANs{DNSNames: []string{"node-a", "old"}, IPs: []net.IP{net.ParseIP("192.0.2.1"), net.ParseIP("192.0.2.7")}}),
			want: names},
		{name: "an IPv4 address written as IPv6 is the same address", cert: cert(now.Add(-time.Hour), now.Add(year), names),
			want: SANs{DNSNames: names.DNSNames, IPs: []net.IP{net.ParseIP("::ffff:192.0.2.1")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			renew, reason := selfSignedRenewal(tc.cert, now, tc.want)
			g.Expect(renew).To(Equal(tc.wantRenew), reason)
			if tc.wantRenew {
				g.Expect(reason).To(ContainSubstring(tc.wantReason))
			}
		})
	}
}

func TestReloadDecision(t *testing.T) {
	a, b := fingerprintOf([][]byte{[]byte("a")}), fingerprintOf([][]byte{[]byte("b")})
	cases := []struct {
		name             string
		last, cur        fingerprint
		readErr, lastErr string
		want             reloadAction
	}{
		{name: "unchanged", last: a, cur: a, want: reloadNothing},
		{name: "changed", last: a, cur: b, want: reloadLoad},
		{name: "first read", cur: a, want: reloadLoad},
		{name: "unreadable", last: a, readErr: "gone", want: reloadReportReadError},
		{name: "still unreadable, reported already", last: a, readErr: "gone", lastErr: "gone", want: reloadNothing},
		{name: "unreadable another way", last: a, readErr: "denied", lastErr: "gone", want: reloadReportReadError},
		{name: "readable again and unchanged", last: a, cur: a, lastErr: "gone", want: reloadNothing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := reloadDecision(tc.last, tc.cur, tc.readErr, tc.lastErr); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if fingerprintOf([][]byte{[]byte("ab"), []byte("c")}) == fingerprintOf([][]byte{[]byte("a"), []byte("bc")}) {
		t.Error("moving bytes from one file to the next is not a change")
	}
}

func TestSelfSignedServingCertificateIsMadeOnceAndKeptPrivate(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "pki")
	opts := ServingOptions{Dir: dir, NodeName: "node-a", Start: ServingSANs("node-a", "192.0.2.1", nil), Addresses: noAddresses, Logger: logr.Discard()}
	first, err := NewServing(opts)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{selfSignedCertName, selfSignedKeyName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)), name)
	}
	fi, err := os.Stat(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o700)))
	leaf := first.Current().Leaf
	g.Expect(leaf.DNSNames).To(ContainElement("node-a"))
	g.Expect(leaf.IPAddresses).To(ContainElement(BeEquivalentTo(net.ParseIP("192.0.2.1").To4())))

	second, err := NewServing(opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.Current().Certificate[0]).To(Equal(first.Current().Certificate[0]), "a restart keeps the certificate")

	opts.CertFile, opts.KeyFile = filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key")
	_, err = NewServing(opts)
	g.Expect(err).To(HaveOccurred(), "given files that do not exist")
}

func TestSelfSignedServingCertificateIsMadeAgain(t *testing.T) {
	now := time.Now()
	names := ServingSANs("node-a", "192.0.2.1", nil)
	cases := []struct {
		name string
		// certPEM is the pair in the directory at start, nil for none.
		notBefore, notAfter time.Time
		names               SANs
		// garbage writes a certificate that does not parse.
		garbage bool
		want    bool
	}{
		{name: "expired", notBefore: now.Add(-48 * time.Hour), notAfter: now.Add(-time.Hour), names: names, want: true},
		{name: "close to its expiry", notBefore: now.Add(-364 * 24 * time.Hour), notAfter: now.Add(24 * time.Hour), names: names, want: true},
		{name: "for another address", notBefore: now.Add(-time.Hour), notAfter: now.Add(300 * 24 * time.Hour),
			names: ServingSANs("node-a", "192.0.2.99", nil), want: true},
		{name: "damaged", garbage: true, want: true},
		{name: "good", notBefore: now.Add(-time.Hour), notAfter: now.Add(300 * 24 * time.Hour), names: names, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := filepath.Join(t.TempDir(), "pki")
			g.Expect(os.Mkdir(dir, 0o700)).To(Succeed())
			certFile, keyFile := filepath.Join(dir, selfSignedCertName), filepath.Join(dir, selfSignedKeyName)
			var certPEM, keyPEM []byte
			if tc.garbage {
				certPEM, keyPEM = []byte("not a certificate"), []byte("not a key")
			} else {
				certPEM, keyPEM = servingPair(t, tc.names, tc.notBefore, tc.notAfter)
			}
			writePair(t, certFile, keyFile, certPEM, keyPEM)

			s, err := NewServing(ServingOptions{Dir: dir, NodeName: "node-a", Start: names, Addresses: noAddresses, Logger: logr.Discard()})
			g.Expect(err).NotTo(HaveOccurred())
			cur := s.Current()
			g.Expect(cur).NotTo(BeNil())
			onDisk, err := os.ReadFile(certFile)
			g.Expect(err).NotTo(HaveOccurred())
			if !tc.want {
				g.Expect(onDisk).To(Equal(certPEM))
				return
			}
			g.Expect(onDisk).NotTo(Equal(certPEM), "the certificate on disk is the old one")
			g.Expect(cur.Leaf.NotAfter).To(BeTemporally(">", now.Add(300*24*time.Hour)))
			g.Expect(names.missingFrom(cur.Leaf)).To(BeEmpty())
			g.Expect(leafOf(t, onDisk).SerialNumber).To(Equal(cur.Leaf.SerialNumber), "the one served is the one written")
			fi, err := os.Stat(keyFile)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		})
	}
}

func TestSelfSignedServingCertificateFollowsTheNodeAndTheClock(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "pki")
	start := ServingSANs("node-a", "192.0.2.1", nil)
	s, err := NewServing(ServingOptions{Dir: dir, NodeName: "node-a", Start: start, Addresses: noAddresses, Logger: logr.Discard()})
	g.Expect(err).NotTo(HaveOccurred())
	first := s.Current()

	g.Expect(s.checkSelfSigned(start)).To(Succeed())
	g.Expect(s.Current()).To(BeIdenticalTo(first), "nothing changed")

	moved := ServingSANs("node-a", "192.0.2.1", []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.7"}})
	g.Expect(s.checkSelfSigned(moved)).To(Succeed())
	second := s.Current()
	g.Expect(second).NotTo(BeIdenticalTo(first))
	g.Expect(moved.missingFrom(second.Leaf)).To(BeEmpty())

	s.now = func() time.Time { return second.Leaf.NotAfter.Add(-24 * time.Hour) }
	g.Expect(s.checkSelfSigned(moved)).To(Succeed())
	g.Expect(s.Current()).NotTo(BeIdenticalTo(second), "a day before its expiry")
}

func TestConfiguredServingCertificateIsReloaded(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	names := ServingSANs("node-a", "", nil)
	c1, k1 := servingPair(t, names, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	writePair(t, certFile, keyFile, c1, k1)
	s, err := NewServing(ServingOptions{CertFile: certFile, KeyFile: keyFile, Dir: filepath.Join(dir, "pki"), Logger: logr.Discard()})
	g.Expect(err).NotTo(HaveOccurred())
	serial := func() *big.Int {
		c, err := s.GetCertificate(&tls.ClientHelloInfo{})
		g.Expect(err).NotTo(HaveOccurred())
		return c.Leaf.SerialNumber
	}
	g.Expect(serial()).To(Equal(leafOf(t, c1).SerialNumber))
	g.Expect(filepath.Join(dir, "pki")).NotTo(BeAnExistingFile(), "no self-signed certificate is made")

	c2, k2 := servingPair(t, names, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	steps := []struct {
		name       string
		cert, key  []byte
		wantSerial *big.Int
	}{
		{name: "the certificate only: its key does not match, the old pair stays", cert: c2, key: k1, wantSerial: leafOf(t, c1).SerialNumber},
		{name: "and then its key", cert: c2, key: k2, wantSerial: leafOf(t, c2).SerialNumber},
		{name: "garbage", cert: []byte("garbage"), key: k2, wantSerial: leafOf(t, c2).SerialNumber},
		{name: "the first pair again", cert: c1, key: k1, wantSerial: leafOf(t, c1).SerialNumber},
	}
	for _, step := range steps {
		writePair(t, certFile, keyFile, step.cert, step.key)
		s.checkFiles()
		g.Expect(serial()).To(Equal(step.wantSerial), step.name)
	}
	g.Expect(os.Remove(certFile)).To(Succeed())
	s.checkFiles()
	g.Expect(serial()).To(Equal(leafOf(t, c1).SerialNumber), "a removed file keeps the pair in use")

	_, err = NewServing(ServingOptions{CertFile: certFile, Dir: dir, Logger: logr.Discard()})
	g.Expect(err).To(HaveOccurred(), "a certificate without a key")
}

func TestClientCAsAreReloaded(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "ca.crt")
	ca1, _ := servingPair(t, SANs{}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	ca2, _ := servingPair(t, SANs{}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	g.Expect(os.WriteFile(path, ca1, 0o600)).To(Succeed())
	cas, err := NewClientCAs(path, logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	subjects := func() int {
		//nolint:staticcheck // counting the certificates of a pool made from PEM
		return len(cas.Pool().Subjects())
	}
	g.Expect(subjects()).To(Equal(1))
	first := cas.Pool()

	g.Expect(os.WriteFile(path, append(append([]byte{}, ca1...), ca2...), 0o600)).To(Succeed())
	cas.Check()
	g.Expect(subjects()).To(Equal(2), "a CA added to the bundle")
	g.Expect(cas.Pool().Equal(first)).To(BeFalse())

	g.Expect(os.WriteFile(path, []byte("garbage"), 0o600)).To(Succeed())
	cas.Check()
	g.Expect(subjects()).To(Equal(2), "a bundle that does not load keeps the last good one")

	g.Expect(os.WriteFile(path, ca2, 0o600)).To(Succeed())
	cas.Check()
	g.Expect(subjects()).To(Equal(1), "a CA removed from the bundle")

	g.Expect(os.WriteFile(path, []byte("garbage"), 0o600)).To(Succeed())
	_, err = NewClientCAs(path, logr.Discard())
	g.Expect(err).To(HaveOccurred(), "a bundle that does not load at start")
}

func TestBootstrappedServingCertificate(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "pki")
	s, err := NewServing(ServingOptions{Dir: dir, NodeName: "node-a", Addresses: noAddresses, Bootstrap: true,
		Config: &rest.Config{Host: "https://127.0.0.1:1"}, Logger: logr.Discard()})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.GetCertificate(&tls.ClientHelloInfo{})
	g.Expect(err).To(MatchError(ErrNoServingCertificate), "no self-signed certificate while none is issued")
	g.Expect(filepath.Join(dir, selfSignedCertName)).NotTo(BeAnExistingFile())

	req := servingRequest("node-a", ServingSANs("node-a", "192.0.2.1", []corev1.NodeAddress{{Type: corev1.NodeInternalDNS, Address: "node-a.internal"}}))
	g.Expect(req.Subject.CommonName).To(Equal("system:node:node-a"))
	g.Expect(req.Subject.Organization).To(ConsistOf("system:nodes"))
	g.Expect(req.DNSNames).To(Equal([]string{"node-a", "node-a.internal"}))
	g.Expect(req.IPAddresses).To(HaveLen(1))
	g.Expect(req.IPAddresses[0].String()).To(Equal("192.0.2.1"))

	// A pair issued before is served at once after a restart.
	names := ServingSANs("node-a", "", nil)
	c, k := servingPair(t, names, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	writePair(t, filepath.Join(dir, servingPairPrefix+"-current.pem"), filepath.Join(dir, "unused.key"), append(c, k...), nil)
	s, err = NewServing(ServingOptions{Dir: dir, NodeName: "node-a", Addresses: noAddresses, Bootstrap: true,
		Config: &rest.Config{Host: "https://127.0.0.1:1"}, Logger: logr.Discard()})
	g.Expect(err).NotTo(HaveOccurred())
	got, err := s.GetCertificate(&tls.ClientHelloInfo{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Leaf.SerialNumber).To(Equal(leafOf(t, c).SerialNumber))
}
