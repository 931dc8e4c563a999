package logindtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// busConfig is a bus that anyone on the machine may use, own any name on
// and send anything over, listening on one socket.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
`

// Bus is a private dbus-daemon.
type Bus struct {
	// Address is the bus's D-Bus address (DBUS_SYSTEM_BUS_ADDRESS).
	Address string
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartBus starts dbus-daemon (Debian's dbus-daemon package) with a
// configuration of its own and its socket in dir, which must be short
// enough for a socket path.
func StartBus(dir string) (*Bus, error) {
	bin, err := exec.LookPath("dbus-daemon")
	if err != nil {
		return nil, fmt.Errorf("dbus-daemon (the Debian package dbus-daemon): %w", err)
	}
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, busConfig, filepath.Join(dir, "bus.sock")), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config-file="+conf, "--print-address", "--nofork", "--nopidfile")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting dbus-daemon: %w", err)
	}
	b := &Bus{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() {
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(b.done)
	}()
	select {
	case line, ok := <-lines:
		if ok && strings.HasPrefix(line, "unix:") {
			b.Address = strings.TrimSpace(line)
			return b, nil
		}
		b.Stop()
		return nil, fmt.Errorf("dbus-daemon printed no address: %q, %s", line, stderr.String())
	case <-time.After(10 * time.Second):
		b.Stop()
		return nil, errors.New("dbus-daemon printed no address in 10s")
	}
}

// Stop stops the daemon and waits for it.
func (b *Bus) Stop() {
	_ = b.cmd.Process.Kill()
	<-b.done
}
