package shutdown

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// systemd-logind and the systemd manager on the system bus, as the kubelet
// talks to them.
const (
	logindService   = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"

	systemdService   = "org.freedesktop.systemd1"
	systemdPath      = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdInterface = "org.freedesktop.systemd1.Manager"

	// prepareForShutdown is logind's signal: true when the machine is
	// about to shut down, false when a shutdown is cancelled.
	prepareForShutdown = "PrepareForShutdown"

	// inhibitWho and inhibitWhy name the lock in `systemd-inhibit --list`.
	inhibitWho = "nodelet"
	inhibitWhy = "nodelet needs time to stop the node's pods"
)

// Drop-in is the kubelet's logind configuration file that raises
// InhibitDelayMaxSec to the shutdown grace period.
const (
	// DefaultLogindConfDir is logind's drop-in directory.
	DefaultLogindConfDir = "/etc/systemd/logind.conf.d"
	// LogindDropIn is the kubelet's drop-in, which nodelet writes too.
	LogindDropIn = "99-kubelet.conf"
)

// callTimeout bounds each D-Bus call.
const callTimeout = 10 * time.Second

// logind is a connection to systemd-logind: the inhibitor lock, its
// InhibitDelayMaxUSec, the PrepareForShutdown signal, and the reload of its
// configuration through the systemd manager.
type logind struct {
	conn *dbus.Conn
}

// dialLogind connects to the bus at address: the system bus
// (DBUS_SYSTEM_BUS_ADDRESS, else /var/run/dbus/system_bus_socket) when
// empty.
func dialLogind(address string) (*logind, error) {
	var conn *dbus.Conn
	var err error
	if address == "" {
		conn, err = dbus.ConnectSystemBus()
	} else {
		conn, err = dbus.Connect(address)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to the system bus: %w", err)
	}
	return &logind{conn: conn}, nil
}

// Close closes the connection; the watch's channel closes with it.
func (l *logind) Close() error { return l.conn.Close() }

// InhibitDelayMax is logind's InhibitDelayMaxUSec: how long a delay lock
// may hold a shutdown back.
func (l *logind) InhibitDelayMax(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var v dbus.Variant
	err := l.conn.Object(logindService, logindPath).
		CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, logindInterface, "InhibitDelayMaxUSec").Store(&v)
	if err != nil {
		return 0, fmt.Errorf("reading logind's InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("reading logind's InhibitDelayMaxUSec: %s, not a uint64", v.Signature())
	}
	if usec > math.MaxInt64/uint64(time.Microsecond) {
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// Inhibit takes a "delay" inhibitor lock on shutdown: logind holds the
// shutdown back (up to InhibitDelayMaxUSec) until the lock is released.
func (l *logind) Inhibit(ctx context.Context) (*inhibitLock, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var fd dbus.UnixFD
	err := l.conn.Object(logindService, logindPath).
		CallWithContext(ctx, logindInterface+".Inhibit", 0, "shutdown", inhibitWho, inhibitWhy, "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("taking a shutdown inhibitor lock: %w", err)
	}
	// No child process (a mount, a plugin) may keep the lock.
	unix.CloseOnExec(int(fd))
	return &inhibitLock{fd: int(fd)}, nil
}

// Watch subscribes to PrepareForShutdown: the channel gets its argument
// for each, and closes when the connection does.
func (l *logind) Watch() (<-chan bool, error) {
	err := l.conn.AddMatchSignal(dbus.WithMatchObjectPath(logindPath), dbus.WithMatchInterface(logindInterface),
		dbus.WithMatchMember(prepareForShutdown))
	if err != nil {
		return nil, fmt.Errorf("subscribing to logind's %s: %w", prepareForShutdown, err)
	}
	signals := make(chan *dbus.Signal, 8)
	l.conn.Signal(signals)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for s := range signals {
			if s.Path != logindPath || s.Name != logindInterface+"."+prepareForShutdown || len(s.Body) == 0 {
				continue
			}
			if active, ok := s.Body[0].(bool); ok {
				out <- active
			}
		}
	}()
	return out, nil
}

// Reload makes logind read its configuration again: the systemd manager
// sends SIGHUP to systemd-logind.service, as the kubelet has it done.
func (l *logind) Reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := l.conn.Object(systemdService, systemdPath).
		CallWithContext(ctx, systemdInterface+".KillUnit", 0, "systemd-logind.service", "all", int32(unix.SIGHUP)).Err
	if err != nil {
		return fmt.Errorf("reloading logind's configuration: %w", err)
	}
	return nil
}

// inhibitLock is a held inhibitor lock: the file descriptor logind handed
// out. Closing it releases the lock.
type inhibitLock struct {
	fd int
}

// Release closes the lock's file descriptor, once; a nil lock is released
// already.
func (l *inhibitLock) Release() error {
	if l == nil || l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	if err != nil {
		return fmt.Errorf("releasing the shutdown inhibitor lock: %w", err)
	}
	return nil
}

// WriteInhibitDelay writes the kubelet's logind drop-in into dir, raising
// InhibitDelayMaxSec to d (whole seconds, rounded up).
func WriteInhibitDelay(dir string, d time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating logind's drop-in directory: %w", err)
	}
	secs := int64(math.Ceil(d.Seconds()))
	content := fmt.Sprintf("# Written by nodelet: the node shutdown grace period (the kubelet's drop-in).\n[Login]\nInhibitDelayMaxSec=%d\n", secs)
	path := filepath.Join(dir, LogindDropIn)
	if err := atomicfile.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing logind's drop-in %s: %w", path, err)
	}
	return nil
}

// errDelayTooShort says logind's InhibitDelayMaxUSec stayed below the
// shutdown grace period after the drop-in was written and logind reloaded.
var errDelayTooShort = errors.New("logind's InhibitDelayMaxUSec is shorter than the shutdown grace period")
