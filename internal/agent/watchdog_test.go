package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// The watchdog speaks systemd's notify protocol on NOTIFY_SOCKET: READY=1
// once, then WATCHDOG=1 while the health checks pass.
func TestWatchdogNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int((200 * time.Millisecond).Microseconds())))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	var healthy atomic.Bool
	healthy.Store(true)
	h := NewHealth("0")
	if err := h.AddHealthzCheck("pleg", func(*http.Request) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("pleg is not healthy")
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewWatchdog(h, logr.Discard()).Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	read := func(timeout time.Duration) string {
		buf := make([]byte, 64)
		if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	if got := read(5 * time.Second); got != "READY=1" {
		t.Fatalf("first message %q, want READY=1", got)
	}
	for i := range 2 {
		if got := read(5 * time.Second); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: %q, want WATCHDOG=1", i, got)
		}
	}
	healthy.Store(false)
	read(300 * time.Millisecond) // a ping already under way
	if got := read(500 * time.Millisecond); got != "" {
		t.Fatalf("got %q while unhealthy, want no ping", got)
	}
	healthy.Store(true)
	if got := read(5 * time.Second); got != "WATCHDOG=1" {
		t.Fatalf("after recovery: %q, want WATCHDOG=1", got)
	}
}

func TestWatchdogWithoutSystemdDoesNothing(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := NewWatchdog(NewHealth("0"), logr.Discard()).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("Start waited without a notify socket")
	}
}
