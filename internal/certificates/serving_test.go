package certificates

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSelfSignedServingCertificateIsMadeOnceAndKeptPrivate(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "pki")
	first, err := ServingCertificate("", "", dir, "node-a", []net.IP{net.ParseIP("192.0.2.1")})
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{selfSignedCertName, selfSignedKeyName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)), name)
	}
	fi, err := os.Stat(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o700)))

	second, err := ServingCertificate("", "", dir, "node-a", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bytes.Equal(first.Certificate[0], second.Certificate[0])).To(BeTrue(), "a restart keeps the certificate")
	g.Expect(first.Leaf.DNSNames).To(ContainElement("node-a"))

	_, err = ServingCertificate(filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key"), dir, "node-a", nil)
	g.Expect(err).To(HaveOccurred(), "given files that do not exist")
}
