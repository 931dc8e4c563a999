// Command rtt is the program of the nodelet.test/rtt image: it measures
// request/response round trips over TCP, the same way in a pod and as a
// process on the host, so that the two can be compared.
//
//	rtt server [-listen :7000]
//	rtt client [-n 2000] [-size 64] [-wait 60s] host:port...
//
// The server echoes every message it reads back to its sender. The client,
// for each address in turn, measures two things, each n times after a
// warm-up:
//
//   - rr: one message sent and its echo read back over one TCP connection
//     kept open for all of them;
//   - crr: a new TCP connection per message: connect, send, read the echo,
//     close.
//
// and prints one line per address and kind on standard output:
//
//	result addr=10.244.2.5:7000 mode=rr n=2000 p50_ns=81234 p90_ns=... p99_ns=... max_ns=...
//
// It waits up to -wait for an address to accept a connection before it
// measures, since a Service's rules may lag its pod. It is built statically
// (CGO_ENABLED=0) by test/utils and is the only file of the image.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"slices"
	"time"
)

// warmup is how many round trips each measurement does first and throws
// away.
const warmup = 50

func main() {
	if len(os.Args) < 2 {
		log.Fatalf("usage: rtt server|client ...")
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = server(os.Args[2:])
	case "client":
		err = client(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q, want server or client", os.Args[1])
	}
	if err != nil {
		log.Printf("rtt: %v", err)
		os.Exit(1)
	}
}

func server(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	listen := fs.String("listen", ":7000", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log.Printf("listening addr=%s", l.Addr())
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		go echo(conn)
	}
}

// echo copies what it reads back until the peer closes.
func echo(conn net.Conn) {
	defer conn.Close()
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	_, _ = io.Copy(conn, conn)
}

func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	n := fs.Int("n", 2000, "round trips per measurement")
	size := fs.Int("size", 64, "message size in bytes")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait for an address to accept connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("client: no address")
	}
	msg := make([]byte, *size)
	for i := range msg {
		msg[i] = byte('a' + i%26)
	}
	for _, addr := range fs.Args() {
		if err := waitFor(addr, *wait); err != nil {
			return err
		}
		rr, err := measureRR(addr, msg, *n)
		if err != nil {
			return fmt.Errorf("rr to %s: %w", addr, err)
		}
		report(addr, "rr", rr)
		crr, err := measureCRR(addr, msg, *n)
		if err != nil {
			return fmt.Errorf("crr to %s: %w", addr, err)
		}
		report(addr, "crr", crr)
	}
	return nil
}

// waitFor returns once addr accepts a connection and echoes a byte.
func waitFor(addr string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		_, err := roundTrip(addr, []byte{'x'})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer after %s: %w", addr, wait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// measureRR times n round trips of msg over one connection.
func measureRR(addr string, msg []byte, n int) ([]time.Duration, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetNoDelay(true)
	buf := make([]byte, len(msg))
	out := make([]time.Duration, 0, n)
	for i := range warmup + n {
		t0 := time.Now()
		if err := exchange(conn, msg, buf); err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, time.Since(t0))
		}
	}
	return out, nil
}

// measureCRR times n connect, round trip, close sequences.
func measureCRR(addr string, msg []byte, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := range warmup + n {
		d, err := roundTrip(addr, msg)
		if err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, d)
		}
	}
	return out, nil
}

// roundTrip connects to addr, sends msg, reads its echo and closes, and
// returns how long that took.
func roundTrip(addr string, msg []byte) (time.Duration, error) {
	t0 := time.Now()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetNoDelay(true)
	if err := exchange(conn, msg, make([]byte, len(msg))); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func exchange(conn net.Conn, msg, buf []byte) error {
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(msg); err != nil {
		return err
	}
	_, err := io.ReadFull(conn, buf)
	return err
}

func report(addr, mode string, ds []time.Duration) {
	slices.Sort(ds)
	pct := func(p int) int64 { return int64(ds[max(0, (len(ds)*p+99)/100-1)]) }
	fmt.Printf("result addr=%s mode=%s n=%d p50_ns=%d p90_ns=%d p99_ns=%d max_ns=%d\n",
		addr, mode, len(ds), pct(50), pct(90), pct(99), int64(ds[len(ds)-1]))
}
