package nodeinfo

import (
	"errors"
	"net"
	"testing"
)

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Memory
		wantErr bool
	}{
		{
			name: "typical",
			in: "MemTotal:       16303436 kB\nMemFree:         1000000 kB\nMemAvailable:   12000000 kB\n" +
				"SwapTotal:       2097148 kB\nSwapFree:        2097148 kB\n" +
				"HugePages_Total:       4\nHugePages_Free:        4\nHugepagesize:       2048 kB\n",
			want: Memory{TotalBytes: 16303436 * 1024, AvailableBytes: 12000000 * 1024, HugePageSizeBytes: 2 << 20, HugePagesTotal: 4, SwapTotalBytes: 2097148 * 1024},
		},
		{name: "no huge pages", in: "MemTotal: 1024 kB\nMemAvailable: 512 kB\n", want: Memory{TotalBytes: 1 << 20, AvailableBytes: 512 << 10}},
		{name: "no MemTotal", in: "MemFree: 1 kB\n", wantErr: true},
		{name: "garbage number", in: "MemTotal: x kB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMeminfo([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseOSRelease(t *testing.T) {
	tests := map[string]string{
		"PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian\"\n": "Debian GNU/Linux 12 (bookworm)",
		"NAME=x\nPRETTY_NAME='Alpine Linux v3.20'\n":                        "Alpine Linux v3.20",
		"PRETTY_NAME=Plain\n": "Plain",
		"NAME=NoPretty\n":     "Linux",
	}
	for in, want := range tests {
		if got := ParseOSRelease([]byte(in)); got != want {
			t.Errorf("ParseOSRelease(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseTaskCount(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "0.12 0.30 0.25 2/345 6789\n", want: 345},
		{in: "0.12 0.30 0.25\n", wantErr: true},
		{in: "0.12 0.30 0.25 345 1\n", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseTaskCount([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseTaskCount(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

const routeTable = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth1	00000000	0102A8C0	0003	0	0	200	00000000	0	0	0
eth0	00000000	010011AC	0003	0	0	100	00000000	0	0	0
eth0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
`

func TestDefaultRouteInterface(t *testing.T) {
	if got := DefaultRouteInterface([]byte(routeTable)); got != "eth0" {
		t.Errorf("got %q, want eth0 (lowest metric)", got)
	}
	if got := DefaultRouteInterface([]byte("Iface\tDestination\n")); got != "" {
		t.Errorf("got %q with no default route, want empty", got)
	}
}

// Interfaces of the node address tests.
var (
	lo     = Interface{Name: "lo", Up: true, Loopback: true, Addrs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}}
	eth0   = Interface{Name: "eth0", Up: true, Addrs: []net.IP{net.ParseIP("fe80::1"), net.ParseIP("172.17.0.5")}}
	eth1   = Interface{Name: "eth1", Up: true, Addrs: []net.IP{net.ParseIP("192.168.2.7")}}
	v6only = Interface{Name: "eth2", Up: true, Addrs: []net.IP{net.ParseIP("2001:db8::5")}}
	down   = Interface{Name: "eth3", Addrs: []net.IP{net.ParseIP("10.0.0.9")}}
)

func TestChooseNodeIP(t *testing.T) {
	tests := []struct {
		name   string
		def    string
		ifaces []Interface
		want   string
	}{
		{name: "default route interface wins", def: "eth1", ifaces: []Interface{lo, eth0, eth1}, want: "192.168.2.7"},
		{name: "no default route: first non-loopback", ifaces: []Interface{lo, eth0, eth1}, want: "172.17.0.5"},
		{name: "IPv4 preferred over an earlier IPv6", ifaces: []Interface{lo, v6only, eth1}, want: "192.168.2.7"},
		{name: "IPv6 when nothing else", ifaces: []Interface{lo, v6only}, want: "2001:db8::5"},
		{name: "down interfaces skipped", def: "eth3", ifaces: []Interface{down, eth0}, want: "172.17.0.5"},
		{name: "loopback only", ifaces: []Interface{lo}, want: "<nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChooseNodeIP(tt.def, tt.ifaces).String(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// nodeIPHost is a Host with interfaces and a default route, counting the
// listings of every interface.
type nodeIPHost struct {
	fakeHost
	interfaceErr error
	lists        *int
}

func (h nodeIPHost) Interfaces() ([]Interface, error) {
	*h.lists++
	return h.fakeHost.Interfaces()
}

func (h nodeIPHost) Interface(name string) (Interface, error) {
	if h.interfaceErr != nil {
		return Interface{}, h.interfaceErr
	}
	return h.fakeHost.Interface(name)
}

func TestNodeIP(t *testing.T) {
	route := func(iface string) string {
		return "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n" +
			iface + "\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
	}
	tests := []struct {
		name         string
		route        string
		ifaces       []Interface
		interfaceErr error
		want         string
		wantLists    int
		wantSoft     int
	}{
		{name: "the default route's interface alone", route: route("eth1"), ifaces: []Interface{eth0, eth1}, want: "192.168.2.7"},
		{name: "default interface without IPv4: another's IPv4 first", route: route("eth2"), ifaces: []Interface{v6only, eth1}, want: "192.168.2.7", wantLists: 1},
		{name: "default interface down", route: route("eth3"), ifaces: []Interface{down, eth0}, want: "172.17.0.5", wantLists: 1},
		{name: "no default route", route: route("")[:10], ifaces: []Interface{eth0, eth1}, want: "172.17.0.5", wantLists: 1},
		{name: "no route file", ifaces: []Interface{eth1}, want: "192.168.2.7", wantLists: 1, wantSoft: 1},
		{name: "default interface unreadable", route: route("eth1"), ifaces: []Interface{eth0, eth1}, interfaceErr: errors.New("gone"), want: "192.168.2.7", wantLists: 1, wantSoft: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lists, soft := 0, 0
			files := map[string]string{}
			if tt.route != "" {
				files[RoutePath] = tt.route
			}
			h := nodeIPHost{fakeHost: fakeHost{files: files, ifaces: tt.ifaces}, interfaceErr: tt.interfaceErr, lists: &lists}
			got := NodeIP(h, func(string, error) { soft++ })
			if got.String() != tt.want || lists != tt.wantLists || soft != tt.wantSoft {
				t.Errorf("NodeIP = %s after %d listings and %d soft errors; want %s, %d, %d", got, lists, soft, tt.want, tt.wantLists, tt.wantSoft)
			}
			// The same address as ChooseNodeIP over every interface.
			if want := ChooseNodeIP(DefaultRouteInterface([]byte(tt.route)), tt.ifaces); !got.Equal(want) {
				t.Errorf("NodeIP = %s, ChooseNodeIP = %s", got, want)
			}
		})
	}
}
