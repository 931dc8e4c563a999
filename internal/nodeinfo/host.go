package nodeinfo

import (
	"fmt"
	"net"
	"os"
	"runtime"

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

// Interfaces lists the host's interfaces and their IP addresses.
func (OSHost) Interfaces() ([]Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	out := make([]Interface, 0, len(ifaces))
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("listing addresses of %s: %w", ifc.Name, err)
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
