package logindtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
	"golang.org/x/sys/unix"
)

const (
	logindName      = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"
	systemdName     = "org.freedesktop.systemd1"
	systemdPath     = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdIface    = "org.freedesktop.systemd1.Manager"
)

// Options configure a stand-in logind.
type Options struct {
	// InhibitDelayMax is InhibitDelayMaxUSec until a reload reads another
	// value from ConfDir.
	InhibitDelayMax time.Duration
	// ConfDir is the drop-in directory a reload reads
	// (InhibitDelayMaxSec= of its *.conf files, the last one in name order
	// winning); empty: a reload changes nothing.
	ConfDir string
}

// Inhibitor is one lock handed out by Inhibit.
type Inhibitor struct {
	What, Who, Why, Mode string
	// Taken is when it was handed out.
	Taken time.Time

	released chan struct{}
	// at is when the holder closed it.
	at time.Time
}

// Released is closed once the holder closed its end.
func (i *Inhibitor) Released() <-chan struct{} { return i.released }

// ReleasedAt is when the holder closed its end; zero while it holds it.
func (i *Inhibitor) ReleasedAt() time.Time {
	select {
	case <-i.released:
		return i.at
	default:
		return time.Time{}
	}
}

// Logind answers on a bus as systemd-logind, and as the systemd manager's
// KillUnit, for what the node shutdown manager uses.
type Logind struct {
	conn  *dbus.Conn
	props *prop.Properties
	opts  Options

	mu         sync.Mutex
	inhibitors []*Inhibitor
	reloads    int
}

// StartLogind connects to the bus at address, takes logind's and
// systemd's names and serves them.
func StartLogind(address string, opts Options) (*Logind, error) {
	conn, err := dbus.Connect(address)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", address, err)
	}
	l := &Logind{conn: conn, opts: opts}
	if err := l.export(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	for _, name := range []string{logindName, systemdName} {
		reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
		if err == nil && reply != dbus.RequestNameReplyPrimaryOwner {
			err = fmt.Errorf("the bus answered %v", reply)
		}
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("taking the name %s: %w", name, err)
		}
	}
	return l, nil
}

func (l *Logind) export() error {
	if err := l.conn.ExportMethodTable(map[string]any{"Inhibit": l.inhibit}, logindPath, logindInterface); err != nil {
		return err
	}
	props, err := prop.Export(l.conn, logindPath, prop.Map{logindInterface: {
		"InhibitDelayMaxUSec": {Value: uint64(l.opts.InhibitDelayMax / time.Microsecond), Emit: prop.EmitTrue},
	}})
	if err != nil {
		return err
	}
	l.props = props
	return l.conn.ExportMethodTable(map[string]any{"KillUnit": l.killUnit}, systemdPath, systemdIface)
}

// Close leaves the bus.
func (l *Logind) Close() error { return l.conn.Close() }

// PrepareForShutdown emits logind's signal: true announces a shutdown,
// false cancels it.
func (l *Logind) PrepareForShutdown(active bool) error {
	return l.conn.Emit(logindPath, logindInterface+".PrepareForShutdown", active)
}

// Inhibitors are the locks handed out, in order.
func (l *Logind) Inhibitors() []*Inhibitor {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.inhibitors)
}

// Held are the locks handed out and not released.
func (l *Logind) Held() []*Inhibitor {
	var out []*Inhibitor
	for _, i := range l.Inhibitors() {
		if i.ReleasedAt().IsZero() {
			out = append(out, i)
		}
	}
	return out
}

// Reloads is how many reloads KillUnit asked for.
func (l *Logind) Reloads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reloads
}

// InhibitDelayMax is InhibitDelayMaxUSec now.
func (l *Logind) InhibitDelayMax() time.Duration {
	v, err := l.props.Get(logindInterface, "InhibitDelayMaxUSec")
	if err != nil {
		return 0
	}
	return time.Duration(v.Value().(uint64)) * time.Microsecond
}

// inhibit is logind's Inhibit: it hands out the write end of a pipe and
// watches the read end; the lock is released once every copy of the write
// end is closed. Its own copy is closed once the caller holds one (the
// reply goes out after this returns).
func (l *Logind) inhibit(sender dbus.Sender, what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, dbus.MakeFailedError(err)
	}
	var pid uint32
	if err := l.conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, string(sender)).Store(&pid); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return -1, dbus.MakeFailedError(err)
	}
	inh := &Inhibitor{What: what, Who: who, Why: why, Mode: mode, Taken: time.Now(), released: make(chan struct{})}
	l.mu.Lock()
	l.inhibitors = append(l.inhibitors, inh)
	l.mu.Unlock()
	go func() {
		r, w := p[0], p[1]
		waitHeld(int(pid), r, w)
		unix.Close(w)
		var buf [1]byte
		for {
			n, err := unix.Read(r, buf[:])
			if n == 0 && err == nil {
				break // every write end is closed
			}
			if err != nil && err != unix.EINTR {
				break
			}
		}
		unix.Close(r)
		inh.at = time.Now()
		close(inh.released)
	}()
	return dbus.UnixFD(p[1]), nil
}

// waitHeld waits until process pid holds a descriptor of the pipe of r
// and w other than those two, for a minute at most.
func waitHeld(pid, r, w int) {
	var st unix.Stat_t
	if err := unix.Fstat(w, &st); err != nil {
		return
	}
	link := fmt.Sprintf("pipe:[%d]", st.Ino)
	self := pid == os.Getpid()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, e := range entries {
			fd, err := strconv.Atoi(e.Name())
			if err != nil || (self && (fd == r || fd == w)) {
				continue
			}
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err == nil && target == link {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killUnit is the systemd manager's KillUnit: SIGHUP to
// systemd-logind.service reloads the stand-in's configuration.
func (l *Logind) killUnit(name, who string, signal int32) *dbus.Error {
	if name != "systemd-logind.service" || signal != int32(unix.SIGHUP) {
		return dbus.MakeFailedError(fmt.Errorf("unit %s, signal %d: only SIGHUP to systemd-logind.service is served", name, signal))
	}
	l.mu.Lock()
	l.reloads++
	l.mu.Unlock()
	if l.opts.ConfDir == "" {
		return nil
	}
	if d, ok := readInhibitDelay(l.opts.ConfDir); ok {
		l.props.SetMust(logindInterface, "InhibitDelayMaxUSec", uint64(d/time.Microsecond))
	}
	return nil
}

// readInhibitDelay reads InhibitDelayMaxSec from the *.conf files of dir,
// the last file in name order that sets it winning, as logind reads its
// drop-ins.
func readInhibitDelay(dir string) (time.Duration, bool) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
	slices.Sort(files)
	var d time.Duration
	found := false
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "InhibitDelayMaxSec=")
			if !ok {
				continue
			}
			if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				d, found = time.Duration(secs)*time.Second, true
			}
		}
		fh.Close()
	}
	return d, found
}
