package nodeinfo

import (
	"encoding/binary"
	"net"
	"slices"
	"syscall"
	"testing"
)

// TestInterfacesAsTheStandardLibrary checks OSHost.Interfaces against
// net.Interface.Addrs on this machine: the same interfaces, each with the
// same addresses in the same order.
func TestInterfacesAsTheStandardLibrary(t *testing.T) {
	got, err := OSHost{}.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	want, err := stdlibInterfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d interfaces, the standard library lists %d", len(got), len(want))
	}
	addrs := 0
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Up != w.Up || g.Loopback != w.Loopback || !slices.EqualFunc(g.Addrs, w.Addrs, net.IP.Equal) {
			t.Errorf("interface %d = %+v, the standard library reads %+v", i, g, w)
		}
		addrs += len(w.Addrs)
	}
	if addrs == 0 {
		t.Skip("no interface of this machine has an address: nothing compared")
	}
}

// TestInterface checks OSHost.Interface against the standard library for
// every interface of this machine, and that a missing one is an error.
func TestInterface(t *testing.T) {
	want, err := stdlibInterfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		g, err := OSHost{}.Interface(w.Name)
		if err != nil {
			t.Errorf("Interface(%s): %v", w.Name, err)
			continue
		}
		if g.Name != w.Name || g.Up != w.Up || g.Loopback != w.Loopback || !slices.EqualFunc(g.Addrs, w.Addrs, net.IP.Equal) {
			t.Errorf("Interface(%s) = %+v, the standard library reads %+v", w.Name, g, w)
		}
	}
	if _, err := (OSHost{}).Interface("nodelet-none0"); err == nil {
		t.Error("Interface of a missing interface: no error")
	}
	if _, err := (OSHost{}).Interface("a-name-longer-than-ifnamsiz"); err == nil {
		t.Error("Interface of a name too long: no error")
	}
}

// stdlibInterfaces lists the interfaces as the standard library reads
// them, one address dump per interface.
func stdlibInterfaces() ([]Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []Interface
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		i := Interface{Name: ifc.Name, Up: ifc.Flags&net.FlagUp != 0, Loopback: ifc.Flags&net.FlagLoopback != 0}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				i.Addrs = append(i.Addrs, n.IP)
			}
		}
		out = append(out, i)
	}
	return out, nil
}

// addrMessage builds an RTM_NEWADDR message (or one of typ) of an address
// of family on interface index with the given attributes.
func addrMessage(typ uint16, family uint8, index uint32, attrs map[uint16][]byte) syscall.NetlinkMessage {
	data := make([]byte, syscall.SizeofIfAddrmsg)
	data[0] = family
	binary.NativeEndian.PutUint32(data[4:8], index)
	// In a fixed order: IFA_ADDRESS before IFA_LOCAL, as the kernel
	// writes them.
	for _, at := range []uint16{syscall.IFA_ADDRESS, syscall.IFA_LOCAL, syscall.IFA_LABEL} {
		v, ok := attrs[at]
		if !ok {
			continue
		}
		a := make([]byte, syscall.SizeofRtAttr, syscall.SizeofRtAttr+len(v)+3)
		binary.NativeEndian.PutUint16(a[0:2], uint16(syscall.SizeofRtAttr+len(v)))
		binary.NativeEndian.PutUint16(a[2:4], at)
		a = append(a, v...)
		for len(a)%syscall.RTA_ALIGNTO != 0 {
			a = append(a, 0)
		}
		data = append(data, a...)
	}
	return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: typ, Len: uint32(syscall.NLMSG_HDRLEN + len(data))}, Data: data}
}

func TestParseAddrMessages(t *testing.T) {
	v4 := func(s string) []byte { return net.ParseIP(s).To4() }
	v6 := func(s string) []byte { return net.ParseIP(s).To16() }
	msgs := []syscall.NetlinkMessage{
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET, 1, map[uint16][]byte{syscall.IFA_ADDRESS: v4("127.0.0.1"), syscall.IFA_LOCAL: v4("127.0.0.1"), syscall.IFA_LABEL: []byte("lo\x00")}),
		// A point-to-point link: IFA_ADDRESS is the peer.
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET, 7, map[uint16][]byte{syscall.IFA_ADDRESS: v4("10.9.0.2"), syscall.IFA_LOCAL: v4("10.9.0.1")}),
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET6, 7, map[uint16][]byte{syscall.IFA_ADDRESS: v6("fe80::1")}),
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET, 2, map[uint16][]byte{syscall.IFA_ADDRESS: v4("192.0.2.10"), syscall.IFA_LOCAL: v4("192.0.2.10")}),
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET6, 2, map[uint16][]byte{syscall.IFA_ADDRESS: v6("2001:db8::10")}),
		// Left out: another message type, a family without IPs, an
		// address of the wrong length, a message too short to hold
		// struct ifaddrmsg.
		addrMessage(syscall.RTM_NEWLINK, syscall.AF_INET, 2, map[uint16][]byte{syscall.IFA_ADDRESS: v4("192.0.2.99")}),
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_PACKET, 2, map[uint16][]byte{syscall.IFA_ADDRESS: {1, 2, 3, 4}}),
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET, 2, map[uint16][]byte{syscall.IFA_ADDRESS: v6("2001:db8::99")}),
		{Header: syscall.NlMsghdr{Type: syscall.RTM_NEWADDR}, Data: []byte{syscall.AF_INET, 24}},
		// Nothing after the end of the dump is read.
		{Header: syscall.NlMsghdr{Type: syscall.NLMSG_DONE}},
		addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET, 2, map[uint16][]byte{syscall.IFA_ADDRESS: v4("192.0.2.98")}),
	}
	got, err := parseAddrMessages(msgs, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{1: {"127.0.0.1"}, 7: {"10.9.0.1", "fe80::1"}, 2: {"192.0.2.10", "2001:db8::10"}}
	if len(got) != len(want) {
		t.Errorf("addresses of %d interfaces, want %d: %v", len(got), len(want), got)
	}
	for index, w := range want {
		var g []string
		for _, ip := range got[index] {
			g = append(g, ip.String())
		}
		if !slices.Equal(g, w) {
			t.Errorf("interface %d: %v, want %v", index, g, w)
		}
	}

	// Those of one interface only.
	got, err = parseAddrMessages(msgs, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[7]) != 2 || got[7][0].String() != "10.9.0.1" {
		t.Errorf("addresses of interface 7: %v", got)
	}

	// The addresses do not alias the dump's buffer.
	buf := addrMessage(syscall.RTM_NEWADDR, syscall.AF_INET6, 3, map[uint16][]byte{syscall.IFA_ADDRESS: v6("2001:db8::3")})
	got, err = parseAddrMessages([]syscall.NetlinkMessage{buf}, 0)
	if err != nil {
		t.Fatal(err)
	}
	clear(buf.Data)
	if s := got[3][0].String(); s != "2001:db8::3" {
		t.Errorf("address after the buffer was cleared: %s", s)
	}
}

// BenchmarkNodeIP finds the node's address as a node without nodeIP does
// at each status update, beside the listing of every interface it made
// before.
func BenchmarkNodeIP(b *testing.B) {
	ifaces, err := net.Interfaces()
	if err != nil {
		b.Fatal(err)
	}
	route, err := OSHost{}.ReadFile(RoutePath)
	if err != nil || DefaultRouteInterface(route) == "" {
		b.Skip("this machine has no default route")
	}
	for _, bc := range []struct {
		name string
		ip   func() net.IP
	}{
		{"default route's interface first", func() net.IP { return NodeIP(OSHost{}, func(string, error) {}) }},
		{"every interface, a dump per interface", func() net.IP {
			all, _ := stdlibInterfaces()
			return ChooseNodeIP(DefaultRouteInterface(route), all)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bc.ip() == nil {
					b.Fatal("no node IP")
				}
			}
			b.ReportMetric(float64(len(ifaces)), "interfaces")
		})
	}
}

// BenchmarkInterfaces lists this machine's interfaces with their
// addresses, as OSHost does and as net.Interface.Addrs per interface did.
// The difference grows with the interfaces: run it in a network namespace
// with a few hundred dummy links to see a node's (docs/benchmarks.md).
func BenchmarkInterfaces(b *testing.B) {
	ifaces, err := net.Interfaces()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		list func() ([]Interface, error)
	}{
		{"one address dump", OSHost{}.Interfaces},
		{"a dump per interface", stdlibInterfaces},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.list(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ifaces)), "interfaces")
		})
	}
}
