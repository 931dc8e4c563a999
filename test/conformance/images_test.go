package conformance

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/nodelet/nodelet/test/utils"
)

// The names the DNS probe test's server knows, in a pod of namespace ns
// whose search list is ns.svc.cluster.local, svc.cluster.local and
// cluster.local.
const (
	probeServiceName  = "kubernetes.default.svc.cluster.local."
	probeServiceIP    = "10.0.0.1"
	probeSRVName      = "_http._tcp.web.ns.svc.cluster.local."
	probeSRVTarget    = "web.ns.svc.cluster.local."
	probePTRName      = "1.0.0.10.in-addr.arpa."
	probeExternalName = "ext.ns.svc.cluster.local."
	probeCNAMETarget  = "foo.example.com."
	probePodFQDN      = "dns-querier-1.dns-test-service.ns.svc.cluster.local"
	probePodIP        = "10.244.1.7"
)

// imagePath is the PATH of both images' configs.
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TestDNSProbeImages runs the commands of the DNS conformance specs' probe
// containers (test/e2e/network/dns_common.go: createProbeCommand and
// createTargetedProbeCommand) in the agnhost and glibc-dns-testing images
// this harness builds, unpacked and entered with chroot, against a DNS
// server of the test's on a loopback address: A, SRV, PTR and CNAME
// records over UDP and TCP through the resolv.conf search list, and the
// pod's names from /etc/hosts through getent.
func TestDNSProbeImages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	server := startProbeDNSServer(t)

	agnhost := filepath.Join(t.TempDir(), "agnhost")
	if err := os.WriteFile(agnhost, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		command string
		want    string // in the output; "" for none at all
	}{
		{"A over UDP, partial name", "dig +notcp +noall +answer +search kubernetes.default A", probeServiceIP},
		{"A over TCP, partial name", "dig +tcp +noall +answer +search kubernetes.default.svc A", probeServiceIP},
		{"A over UDP, full name", "dig +notcp +noall +answer +search " + strings.TrimSuffix(probeServiceName, ".") + " A", probeServiceIP},
		{"SRV over UDP, partial name", "dig +notcp +noall +answer +search _http._tcp.web.ns.svc SRV", probeSRVTarget},
		{"SRV over TCP, partial name", "dig +tcp +noall +answer +search _http._tcp.web SRV", probeSRVTarget},
		{"PTR over UDP", "dig +notcp +noall +answer +search " + probePTRName + " PTR", probeServiceName},
		{"PTR over TCP", "dig +tcp +noall +answer +search " + probePTRName + " PTR", probeServiceName},
		{"CNAME, short", "dig +short " + strings.TrimSuffix(probeExternalName, ".") + " CNAME", probeCNAMETarget},
		{"unknown name, no answer", "dig +notcp +noall +answer +search absent A", ""},
		{"hosts entry, FQDN", "getent hosts " + probePodFQDN, probePodIP},
		{"hosts entry, hostname", "getent hosts dns-querier-1", probePodIP},
		{"probe loop writes its result", `for i in $(seq 1 2); do check="$(dig +notcp +noall +answer +search kubernetes.default A)" && test -n "$check" && echo OK > /results/udp; sleep 0; done; cat /results/udp`, "OK"},
	}
	for _, image := range []string{AgnhostImage, GlibcDNSTestingImage} {
		t.Run(image, func(t *testing.T) {
			rootfs := unpackE2EImage(ctx, t, image, agnhost)
			writePodFiles(t, rootfs, server)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					cmd := exec.CommandContext(ctx, "chroot", rootfs, "sh", "-c", tc.command)
					cmd.Env = []string{imagePath}
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%s: %v\n%s", tc.command, err, out)
					}
					got := strings.TrimSpace(string(out))
					if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
						t.Errorf("%s printed %q, want %q in it", tc.command, got, tc.want)
					}
				})
			}
			// A name in neither /etc/hosts nor DNS: getent must fail, as
			// the probes' `test -n "$(getent hosts …)"` relies on.
			cmd := exec.CommandContext(ctx, "chroot", rootfs, "/usr/bin/getent", "hosts", "absent")
			cmd.Env = []string{imagePath}
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("getent hosts absent succeeded: %s", out)
			}
		})
	}
}

// unpackE2EImage builds image as ImageArchives does and unpacks it into a
// directory of the test's.
func unpackE2EImage(ctx context.Context, t *testing.T, image, agnhost string) string {
	t.Helper()
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")
	if err := writeArchive(ctx, image, archive, e2eImages[image], agnhost); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := utils.UnpackImage(archive, image, rootfs); err != nil {
		t.Fatal(err)
	}
	return rootfs
}

// writePodFiles writes the files a pod's agent provides: resolv.conf with
// the pod's search list pointing at server, and /etc/hosts with the pod's
// names, as for a pod with hostname dns-querier-1 and subdomain
// dns-test-service; and the results directory the probes write to.
func writePodFiles(t *testing.T, rootfs, server string) {
	t.Helper()
	files := map[string]string{
		"etc/resolv.conf": "nameserver " + server + "\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
		"etc/hosts":       "127.0.0.1\tlocalhost\n" + probePodIP + "\t" + probePodFQDN + "\tdns-querier-1\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(rootfs, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(rootfs, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// startProbeDNSServer serves the probe names over UDP and TCP on port 53
// of a random loopback address (resolv.conf has no port), and returns the
// address.
func startProbeDNSServer(t *testing.T) string {
	t.Helper()
	var udp net.PacketConn
	var tcp net.Listener
	var addr string
	for range 10 {
		addr = fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
		var err error
		if udp, err = net.ListenPacket("udp4", net.JoinHostPort(addr, "53")); err != nil {
			continue
		}
		if tcp, err = net.Listen("tcp4", net.JoinHostPort(addr, "53")); err != nil {
			udp.Close()
			udp = nil
			continue
		}
		break
	}
	if udp == nil {
		t.Fatal("no loopback address with port 53 free")
	}
	t.Cleanup(func() {
		udp.Close()
		tcp.Close()
	})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp, err := probeAnswer(buf[:n]); err == nil {
				_, _ = udp.WriteTo(resp, from)
			}
		}
	}()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			go serveProbeTCP(c)
		}
	}()
	return addr
}

// serveProbeTCP answers the length-prefixed queries of one connection.
func serveProbeTCP(c net.Conn) {
	defer c.Close()
	for {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var n uint16
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return
		}
		q := make([]byte, n)
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp, err := probeAnswer(q)
		if err != nil {
			return
		}
		if err := binary.Write(c, binary.BigEndian, uint16(len(resp))); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// probeRecords are the records of the probe test's server, by name.
var probeRecords = map[string]struct {
	typ  dnsmessage.Type
	body dnsmessage.ResourceBody
}{
	probeServiceName:  {dnsmessage.TypeA, &dnsmessage.AResource{A: [4]byte(net.ParseIP(probeServiceIP).To4())}},
	probeSRVName:      {dnsmessage.TypeSRV, &dnsmessage.SRVResource{Weight: 100, Port: 80, Target: dnsmessage.MustNewName(probeSRVTarget)}},
	probePTRName:      {dnsmessage.TypePTR, &dnsmessage.PTRResource{PTR: dnsmessage.MustNewName(probeServiceName)}},
	probeExternalName: {dnsmessage.TypeCNAME, &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(probeCNAMETarget)}},
}

// probeAnswer answers one query from probeRecords: the record of the name
// when the type asked is its type, no answer for another type, and
// NXDOMAIN for an unknown name.
func probeAnswer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	record, known := probeRecords[strings.ToLower(q.Name.String())]
	resp := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired, RecursionAvailable: true},
		Questions: []dnsmessage.Question{q},
	}
	if !known {
		resp.Header.RCode = dnsmessage.RCodeNameError
	} else if record.typ == q.Type {
		resp.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: dnsmessage.ClassINET, TTL: 30},
			Body:   record.body,
		}}
	}
	msg, err := resp.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing the answer to %s: %w", q.Name, err)
	}
	return msg, nil
}
