package certificates

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	// maxRenewBefore is the longest before its expiry that a self-signed
	// serving certificate is made again.
	maxRenewBefore = 30 * 24 * time.Hour
	// renewBeforeFraction is the part of its lifetime before its expiry
	// that a self-signed serving certificate is made again, when that is
	// shorter than maxRenewBefore.
	renewBeforeFraction = 5
)

// SANs are the names a serving certificate is for: the node's DNS names
// and IP addresses, sorted and without duplicates.
type SANs struct {
	DNSNames []string
	IPs      []net.IP
}

// ServingSANs are the names the node API's certificate must hold: the node
// name, the configured nodeIP (when it is one) and the node's addresses as
// the Node reports them (host names and DNS names as DNS names, internal
// and external IPs as IPs; a name that is an IP counts as an IP).
func ServingSANs(nodeName, nodeIP string, addrs []corev1.NodeAddress) SANs {
	var s SANs
	add := func(name string) {
		if name == "" {
			return
		}
		if ip := net.ParseIP(name); ip != nil {
			s.IPs = append(s.IPs, ip)
			return
		}
		s.DNSNames = append(s.DNSNames, name)
	}
	add(nodeName)
	add(nodeIP)
	for _, a := range addrs {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS, corev1.NodeInternalIP, corev1.NodeExternalIP:
			add(a.Address)
		}
	}
	return s.normalized()
}

// normalized sorts s and drops duplicates, so that two lists of the same
// names are equal (a certificate manager compares requests with
// reflect.DeepEqual).
func (s SANs) normalized() SANs {
	out := SANs{DNSNames: slices.Clone(s.DNSNames)}
	slices.Sort(out.DNSNames)
	out.DNSNames = slices.Compact(out.DNSNames)
	for _, ip := range s.IPs {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		out.IPs = append(out.IPs, ip)
	}
	// IPv4 (4 bytes) before IPv6, each in address order.
	slices.SortFunc(out.IPs, func(a, b net.IP) int {
		if c := cmp.Compare(len(a), len(b)); c != 0 {
			return c
		}
		return bytes.Compare(a, b)
	})
	out.IPs = slices.CompactFunc(out.IPs, net.IP.Equal)
	return out
}

// missingFrom returns the names of s that cert is not for, as strings.
func (s SANs) missingFrom(cert *x509.Certificate) []string {
	var missing []string
	for _, n := range s.DNSNames {
		if !slices.Contains(cert.DNSNames, n) {
			missing = append(missing, n)
		}
	}
	for _, ip := range s.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			missing = append(missing, ip.String())
		}
	}
	return missing
}

// renewBefore is how long before its expiry a self-signed certificate of
// that lifetime is made again: a fifth of its lifetime, at most 30 days.
func renewBefore(lifetime time.Duration) time.Duration {
	return min(lifetime/renewBeforeFraction, maxRenewBefore)
}

// selfSignedRenewal says whether the self-signed serving certificate cert
// must be made again at now for the names want, and why: it is expired or
// not yet valid, close to its expiry (renewBefore), or not for one of the
// node's names or addresses (a certificate for more names is kept).
func selfSignedRenewal(cert *x509.Certificate, now time.Time, want SANs) (renew bool, reason string) {
	switch {
	case cert == nil:
		return true, "there is no certificate"
	case now.Before(cert.NotBefore):
		return true, "the certificate is not valid before " + cert.NotBefore.UTC().Format(time.RFC3339)
	case !now.Before(cert.NotAfter):
		return true, "the certificate expired at " + cert.NotAfter.UTC().Format(time.RFC3339)
	case cert.NotAfter.Sub(now) < renewBefore(cert.NotAfter.Sub(cert.NotBefore)):
		return true, "the certificate expires at " + cert.NotAfter.UTC().Format(time.RFC3339)
	}
	if missing := want.missingFrom(cert); len(missing) > 0 {
		return true, "the certificate is not for the node's names or addresses " + strings.Join(missing, ", ")
	}
	return false, ""
}

// fingerprint identifies the content of a set of files: their hash, in
// order, each with its length so that moving bytes from one to the next
// changes it.
type fingerprint [sha256.Size]byte

func fingerprintOf(contents [][]byte) fingerprint {
	h := sha256.New()
	for _, c := range contents {
		var n [8]byte
		for i := range n {
			n[i] = byte(uint64(len(c)) >> (8 * i))
		}
		h.Write(n[:])
		h.Write(c)
	}
	var f fingerprint
	copy(f[:], h.Sum(nil))
	return f
}

// reloadAction is what a file watcher does after reading its files.
type reloadAction int

const (
	// reloadNothing: the files are as they were last loaded or last
	// refused.
	reloadNothing reloadAction = iota
	// reloadLoad: the files changed; parse them and, if they are good,
	// use them.
	reloadLoad
	// reloadReportReadError: the files cannot be read; keep what is
	// loaded and report it (once per error).
	reloadReportReadError
)

// reloadDecision says what to do with files read with readErr and content
// cur, when last is the content last tried and lastErr the read error last
// reported.
func reloadDecision(last, cur fingerprint, readErr, lastErr string) reloadAction {
	if readErr != "" {
		if readErr == lastErr {
			return reloadNothing
		}
		return reloadReportReadError
	}
	if cur == last {
		return reloadNothing
	}
	return reloadLoad
}
