package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// Endpoint is a parsed listening address: a network ("unix" or "tcp") and
// an address for net.Listen.
type Endpoint struct {
	Network, Address string
}

// ParseEndpoint parses /path, unix:///path, unix:/path, tcp://host:port and
// tcp://:port.
func ParseEndpoint(s string) (Endpoint, error) {
	if s == "" {
		return Endpoint{}, errors.New("an endpoint is required")
	}
	if strings.HasPrefix(s, "/") {
		return Endpoint{Network: "unix", Address: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, fmt.Errorf("parsing endpoint %q: %w", s, err)
	}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if p == "" {
			p = u.Opaque
		}
		if u.Host != "" {
			p = u.Host + p
		}
		if p == "" {
			return Endpoint{}, fmt.Errorf("endpoint %q names no socket", s)
		}
		return Endpoint{Network: "unix", Address: p}, nil
	case "tcp":
		if u.Host == "" {
			return Endpoint{}, fmt.Errorf("endpoint %q names no port", s)
		}
		return Endpoint{Network: "tcp", Address: u.Host}, nil
	default:
		return Endpoint{}, fmt.Errorf("endpoint %q: want unix or tcp", s)
	}
}

// Listen listens on e; a Unix socket left by an earlier run is removed
// first.
func Listen(e Endpoint) (net.Listener, error) {
	if e.Network == "unix" {
		if err := os.Remove(e.Address); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing a stale socket: %w", err)
		}
	}
	l, err := net.Listen(e.Network, e.Address)
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s: %w", e.Network, e.Address, err)
	}
	return l, nil
}

// Serve pairs connections of first and second until ctx ends or a listener
// fails: it waits for one on first, then takes the next one of second
// (which the kernel has queued meanwhile, so a dialer of second may
// connect ahead of time), and copies between them. It closes both
// listeners and every open pair before it returns.
func Serve(ctx context.Context, first, second net.Listener) error {
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		_ = first.Close()
		_ = second.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			_ = c.Close()
		}
	})
	defer stop()
	defer wg.Wait()
	defer func() { _ = first.Close(); _ = second.Close() }()
	for {
		a, err := first.Accept()
		if err != nil {
			return acceptErr(ctx, first, err)
		}
		b, err := second.Accept()
		if err != nil {
			_ = a.Close()
			return acceptErr(ctx, second, err)
		}
		klog.V(3).InfoS("Paired connections", "first", first.Addr(), "second", second.Addr())
		mu.Lock()
		conns[a], conns[b] = struct{}{}, struct{}{}
		mu.Unlock()
		wg.Add(2)
		done := func() {
			wg.Done()
			mu.Lock()
			delete(conns, a)
			delete(conns, b)
			mu.Unlock()
		}
		go func() { defer done(); pipe(b, a) }()
		go func() { defer done(); pipe(a, b) }()
	}
}

// pipe copies from src to dst until src ends, then closes both: the peer
// of dst learns that nothing more comes, and the other direction stops.
func pipe(dst, src net.Conn) {
	n, err := io.Copy(dst, src)
	klog.V(5).InfoS("Stopped copying", "from", src.LocalAddr(), "bytes", n, "err", err)
	_ = dst.Close()
	_ = src.Close()
}

func acceptErr(ctx context.Context, l net.Listener, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("accepting on %s: %w", l.Addr(), err)
}

// Requested reports whether hostpathplugin's command line args asks for its
// proxy mode: it names a non-empty --proxy-endpoint (one dash or two,
// "=value" or the value as the next argument).
func Requested(args []string) bool {
	for i, a := range args {
		if a == "--" {
			return false
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "proxy-endpoint" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		return value != ""
	}
	return false
}
