package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The addresses of a run. qemu's user network is net guestNet: the host is
// guestHost there, its DNS guestDNS, and the guest GuestIP
// (hack/vm/guest/10-vm.network). HostLink holds APIServerIP and GuestIP on
// the host for the run.
const (
	GuestIP     = "10.253.1.15"
	APIServerIP = "10.253.0.1"
	guestNet    = "10.253.1.0/24"
	guestHost   = "10.253.1.2"
	guestDNS    = "10.253.1.3"
	// HostLink is the link on the host that holds APIServerIP and GuestIP
	// while a VM runs: a bridge with no ports (the dummy link type needs a
	// kernel module these machines may lack).
	HostLink = "nodeletvm0"
	// shareTag names the 9p share the guest mounts at /mnt/host.
	shareTag = "host"
)

// Options describe one VM.
type Options struct {
	// ImageDir is hack/vm/image.sh's output: disk.img, vmlinuz,
	// initrd.img and id_ed25519.
	ImageDir string
	// WorkDir holds the run's copy-on-write overlay, the serial console's
	// log and the ssh control socket.
	WorkDir string
	// ShareDir is shared read-only with the guest as 9p tag "host".
	ShareDir string
	// CPUs and MemoryMiB size the guest.
	CPUs      int
	MemoryMiB int
	// SSHPort is the port on the host's loopback forwarded to the guest's
	// sshd.
	SSHPort int
	// NodeAPIPort is the port forwarded from GuestIP on the host to the
	// same port in the guest: the node API's.
	NodeAPIPort int
}

// Overlay is the path of the run's disk, a qcow2 overlay on the base image.
func (o Options) Overlay() string { return filepath.Join(o.WorkDir, "overlay.qcow2") }

// ConsoleLog is the path of the guest's serial console output.
func (o Options) ConsoleLog() string { return filepath.Join(o.WorkDir, "console.log") }

// QemuArgs is the qemu-system-x86_64 command line (without the program)
// that boots o: software emulation, the guest kernel and initrd from the
// image directory, the overlay as a virtio disk, user networking with the
// two forwarded ports, the share over virtio 9p, the serial console to a
// file and no display.
func QemuArgs(o Options) []string {
	netdev := strings.Join([]string{
		"user", "id=net0",
		"net=" + guestNet, "host=" + guestHost, "dns=" + guestDNS,
		fmt.Sprintf("hostfwd=tcp:127.0.0.1:%d-:22", o.SSHPort),
		fmt.Sprintf("hostfwd=tcp:%s:%d-%s:%d", GuestIP, o.NodeAPIPort, GuestIP, o.NodeAPIPort),
	}, ",")
	return []string{
		"-accel", "tcg,thread=multi",
		"-cpu", "max",
		"-smp", strconv.Itoa(o.CPUs),
		"-m", strconv.Itoa(o.MemoryMiB),
		"-kernel", filepath.Join(o.ImageDir, "vmlinuz"),
		"-initrd", filepath.Join(o.ImageDir, "initrd.img"),
		"-append", "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 panic=-1",
		"-drive", "file=" + o.Overlay() + ",if=virtio,format=qcow2,cache=unsafe",
		"-netdev", netdev,
		"-device", "virtio-net-pci,netdev=net0",
		"-virtfs", "local,path=" + o.ShareDir + ",mount_tag=" + shareTag + ",security_model=none,readonly=on",
		"-display", "none",
		"-serial", "file:" + o.ConsoleLog(),
		"-monitor", "none",
		"-no-reboot",
	}
}

// SSHArgs is the ssh command line (without the program) that runs a
// command in the guest as root: the image's key, no host key checks (the
// guest is made afresh each run), one multiplexed connection per run (a
// key exchange under emulation takes a while).
func SSHArgs(o Options) []string {
	return []string{
		"-i", filepath.Join(o.ImageDir, "id_ed25519"),
		"-p", strconv.Itoa(o.SSHPort),
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR",
		"-o", "BatchMode=yes",
		"-o", "ConnectTimeout=20",
		"-o", "ServerAliveInterval=10",
		"-o", "ControlMaster=auto",
		"-o", "ControlPath=" + filepath.Join(o.WorkDir, "ssh.sock"),
		"-o", "ControlPersist=30m",
		"root@127.0.0.1",
	}
}

// VM is a running guest.
type VM struct {
	Opts Options
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Boot makes the run's overlay on the base image and starts qemu. It does
// not wait for the guest: see WaitSSH.
func Boot(ctx context.Context, o Options) (*VM, error) {
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the VM's directory: %w", err)
	}
	base := filepath.Join(o.ImageDir, "disk.img")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base, o.Overlay()).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("creating the overlay on %s: %w: %s", base, err, out)
	}
	cmd := exec.Command("qemu-system-x86_64", QemuArgs(o)...)
	logFile, err := os.Create(filepath.Join(o.WorkDir, "qemu.log"))
	if err != nil {
		return nil, fmt.Errorf("creating qemu's log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C of the test run reaches it through
	// Stop, not before the test's cleanup ran.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting qemu: %w", err)
	}
	v := &VM{Opts: o, cmd: cmd, done: make(chan struct{})}
	go func() {
		v.err = cmd.Wait()
		_ = logFile.Close()
		close(v.done)
	}()
	return v, nil
}

// Exited reports whether qemu has exited, with its error.
func (v *VM) Exited() (bool, error) {
	select {
	case <-v.done:
		return true, v.err
	default:
		return false, nil
	}
}

// WaitSSH waits until the guest answers a command over ssh.
func (v *VM) WaitSSH(ctx context.Context) error {
	var last error
	for {
		if exited, err := v.Exited(); exited {
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("qemu exited while the guest booted: %w; %s", err, v.qemuLog())
		}
		attempt, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := v.Run(attempt, "true")
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the guest's sshd: %w (last: %w)", ctx.Err(), last)
		case <-time.After(2 * time.Second):
		}
	}
}

func (v *VM) qemuLog() string {
	data, _ := os.ReadFile(filepath.Join(v.Opts.WorkDir, "qemu.log"))
	return strings.TrimSpace(string(data))
}

// Run runs script with bash in the guest as root and returns its standard
// output; a failure's error carries its standard error.
func (v *VM) Run(ctx context.Context, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "ssh", append(SSHArgs(v.Opts), "bash", "-s")...)
	cmd.Stdin = strings.NewReader(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// ssh's control master stays behind as a child of its own: do not
	// wait for its copy of our pipes.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("running in the guest: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Stop ends qemu (the overlay is thrown away with WorkDir by the caller)
// and the ssh control master.
func (v *VM) Stop() error {
	_ = exec.Command("ssh", append(SSHArgs(v.Opts)[:len(SSHArgs(v.Opts))-1], "-O", "exit", "root@127.0.0.1")...).Run()
	if exited, _ := v.Exited(); exited {
		return nil
	}
	_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		<-v.done
	}
	return nil
}

// SetUpHostLink adds HostLink with APIServerIP and GuestIP, and returns
// the function that removes it. A link left by a killed run is replaced.
func SetUpHostLink() (func() error, error) {
	// Not the caller's context: the link is removed after it ended.
	ip := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	_ = ip("link", "del", HostLink)
	remove := func() error { return ip("link", "del", HostLink) }
	err := errors.Join(
		ip("link", "add", HostLink, "type", "bridge"),
		ip("addr", "add", APIServerIP+"/32", "dev", HostLink),
		ip("addr", "add", GuestIP+"/32", "dev", HostLink),
		ip("link", "set", HostLink, "up"),
		// The host's connections to GuestIP (the API server's to the node
		// API) leave from APIServerIP, not from GuestIP itself: qemu hands
		// them to the guest with their source address, and a packet from
		// its own address is one the guest drops.
		ip("route", "replace", "local", GuestIP, "dev", HostLink, "table", "local",
			"proto", "kernel", "scope", "host", "src", APIServerIP),
	)
	if err != nil {
		_ = remove()
		return nil, err
	}
	return remove, nil
}

// FreePort returns a TCP port free on ip now.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
