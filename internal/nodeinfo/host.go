package nodeinfo

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// Files the Observer reads through Host.ReadFile.
const (
	MeminfoPath     = "/proc/meminfo"
	LoadavgPath     = "/proc/loadavg"
	PIDMaxPath      = "/proc/sys/kernel/pid_max"
	BootIDPath      = "/proc/sys/kernel/random/boot_id"
	RoutePath       = "/proc/net/route"
	MachineIDPath   = "/etc/machine-id"
	ProductUUIDPath = "/sys/class/dmi/id/product_uuid"
	OSReleasePath   = "/etc/os-release"
	// OSReleaseFallbackPath is read when OSReleasePath is missing, as the
	// os-release specification says.
	OSReleaseFallbackPath = "/usr/lib/os-release"
)

// Host is the narrow view of the machine the Observer needs. Implementations
// must be safe for concurrent use.
type Host interface {
	// ReadFile returns the contents of a file such as /proc/meminfo.
	ReadFile(name string) ([]byte, error)
	// Statfs returns the size and free space of the filesystem holding path.
	Statfs(path string) (Filesystem, error)
	// NumCPU is the number of logical CPUs.
	NumCPU() int
	// KernelRelease is the kernel release as uname -r prints it.
	KernelRelease() (string, error)
	// Interfaces lists the network interfaces with their addresses.
	Interfaces() ([]Interface, error)
	// Interface reads the named interface with its addresses, without
	// listing the others.
	Interface(name string) (Interface, error)
}

// Filesystem is the size of one filesystem, in bytes and inodes.
type Filesystem struct {
	CapacityBytes  int64
	AvailableBytes int64
	Inodes         int64
	InodesFree     int64
}

// Interface is one network interface.
type Interface struct {
	Name     string
	Up       bool
	Loopback bool
	Addrs    []net.IP
}

// OSHost is the Host of the machine this process runs on.
type OSHost struct{}

var _ Host = OSHost{}

// ReadFile reads a file of the host.
func (OSHost) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// Statfs reads the filesystem statistics of path. Available space is what an
// unprivileged user may still use, as df reports it.
func (OSHost) Statfs(path string) (Filesystem, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Filesystem{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := int64(st.Bsize)
	return Filesystem{
		CapacityBytes:  int64(st.Blocks) * bsize,
		AvailableBytes: int64(st.Bavail) * bsize,
		Inodes:         int64(st.Files),
		InodesFree:     int64(st.Ffree),
	}, nil
}

// NumCPU is runtime.NumCPU.
func (OSHost) NumCPU() int { return runtime.NumCPU() }

// KernelRelease calls uname.
func (OSHost) KernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

// Interfaces lists the host's interfaces and their IP addresses: one dump
// of the links and one of the addresses. (net.Interface.Addrs dumps every
// address of the host for the one interface it is asked about, so asking
// it for each interface grows with the square of the interfaces: a node
// has a veth per pod.)
func (OSHost) Interfaces() ([]Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	addrs, err := interfaceAddrs(0)
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ifaces))
	for _, ifc := range ifaces {
		out = append(out, Interface{
			Name: ifc.Name, Up: ifc.Flags&net.FlagUp != 0, Loopback: ifc.Flags&net.FlagLoopback != 0,
			Addrs: addrs[ifc.Index],
		})
	}
	return out, nil
}

// Interface reads the named interface's flags and index from the kernel
// (ioctl) and its addresses from one address dump: a node's address is
// found without reading the links of its pods' veths.
func (OSHost) Interface(name string) (Interface, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return Interface{}, fmt.Errorf("reading network interface %s: %w", name, os.NewSyscallError("socket", err))
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return Interface{}, fmt.Errorf("reading network interface %q: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return Interface{}, fmt.Errorf("reading network interface %s: %w", name, os.NewSyscallError("SIOCGIFFLAGS", err))
	}
	flags := ifr.Uint16()
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return Interface{}, fmt.Errorf("reading network interface %s: %w", name, os.NewSyscallError("SIOCGIFINDEX", err))
	}
	index := int(ifr.Uint32())
	addrs, err := interfaceAddrs(index)
	if err != nil {
		return Interface{}, err
	}
	return Interface{Name: name, Up: flags&unix.IFF_UP != 0, Loopback: flags&unix.IFF_LOOPBACK != 0, Addrs: addrs[index]}, nil
}

// interfaceAddrs reads the IP addresses of the host's interface of that
// index (every interface's with 0), by interface index, in one netlink
// dump.
func interfaceAddrs(index int) (map[int][]net.IP, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("listing network addresses: %w", os.NewSyscallError("netlinkrib", err))
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, fmt.Errorf("listing network addresses: %w", os.NewSyscallError("parsenetlinkmessage", err))
	}
	return parseAddrMessages(msgs, index)
}

// parseAddrMessages reads the addresses of an RTM_GETADDR dump, by
// interface index, in the dump's order: those of the interface of index
// only, or all with index 0. An address is its IFA_LOCAL where
// it has one (the local end of a point-to-point link, whose IFA_ADDRESS
// is the peer's), else its IFA_ADDRESS, as the standard library reads it.
func parseAddrMessages(msgs []syscall.NetlinkMessage, index int) (map[int][]net.IP, error) {
	out := map[int][]net.IP{}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type == syscall.NLMSG_DONE {
			break
		}
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		// struct ifaddrmsg: family, prefix length, flags, scope (one
		// byte each), then the interface index (32 bits, host order).
		family := m.Data[0]
		ifIndex := int(binary.NativeEndian.Uint32(m.Data[4:8]))
		if index != 0 && ifIndex != index {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			return nil, fmt.Errorf("listing network addresses: %w", os.NewSyscallError("parsenetlinkrouteattr", err))
		}
		var local, address []byte
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.IFA_LOCAL:
				local = a.Value
			case syscall.IFA_ADDRESS:
				address = a.Value
			}
		}
		v := address
		if local != nil {
			v = local
		}
		var ip net.IP
		switch {
		case family == syscall.AF_INET && len(v) == net.IPv4len:
			ip = net.IPv4(v[0], v[1], v[2], v[3])
		case family == syscall.AF_INET6 && len(v) == net.IPv6len:
			ip = slices.Clone(net.IP(v))
		default:
			continue
		}
		out[ifIndex] = append(out[ifIndex], ip)
	}
	return out, nil
}
