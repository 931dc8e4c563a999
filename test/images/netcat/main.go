// Command nc is the part of OpenBSD netcat that Kubernetes' e2e suite runs
// in its agnhost image (netcat-openbsd): `nc [-v] [-t] [-u] [-z] [-w secs]
// [-W packets] [-p port] host port`. It connects (TCP, or UDP with -u),
// sends its standard input, and copies what comes back to its standard
// output until the peer closes, nothing arrives for -w seconds, or -W
// packets arrived. With -z it only connects. With -v it reports the
// connection on standard error. It exits 1 when it cannot connect.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

// lookupTimeout bounds the host name's lookup.
const lookupTimeout = 20 * time.Second

type options struct {
	verbose, udp, zero bool
	timeout            time.Duration
	packets            int
	localPort          int
	host, port         string
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nc:", err)
		os.Exit(1)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "nc:", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	o := options{}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			switch c := a[j]; c {
			case 'v':
				o.verbose = true
			case 'u':
				o.udp = true
			case 'z':
				o.zero = true
			case 't', 'n', 'N', 'q':
				// Telnet negotiation, numeric hosts only, shutdown on EOF: no
				// difference for the suite's peers.
			case 'w', 'W', 'p':
				val := a[j+1:]
				if val == "" {
					i++
					if i >= len(args) {
						return o, fmt.Errorf("option -%c needs a value", c)
					}
					val = args[i]
				}
				n, err := strconv.Atoi(val)
				if err != nil {
					return o, fmt.Errorf("option -%c: %w", c, err)
				}
				switch c {
				case 'w':
					o.timeout = time.Duration(n) * time.Second
				case 'W':
					o.packets = n
				case 'p':
					o.localPort = n
				}
				j = len(a)
			default:
				return o, fmt.Errorf("invalid option -- '%c'", c)
			}
		}
	}
	if len(rest) != 2 {
		return o, fmt.Errorf("usage: nc [-vtuz] [-w secs] [-W packets] [-p port] host port")
	}
	o.host, o.port = rest[0], rest[1]
	return o, nil
}

func run(o options) error {
	network := "tcp"
	d := net.Dialer{Timeout: o.timeout}
	if o.udp {
		network = "udp"
		if o.localPort != 0 {
			d.LocalAddr = &net.UDPAddr{Port: o.localPort}
		}
	} else if o.localPort != 0 {
		d.LocalAddr = &net.TCPAddr{Port: o.localPort}
	}
	// As netcat-openbsd, -w bounds the connect and idle times, not the
	// name lookup, which takes the resolver's own timeouts and retries.
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	addrs, err := net.DefaultResolver.LookupHost(ctx, o.host)
	cancel()
	if err != nil {
		return err
	}
	var conn net.Conn
	for _, addr := range addrs {
		if conn, err = d.Dial(network, net.JoinHostPort(addr, o.port)); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if o.verbose {
		fmt.Fprintf(os.Stderr, "Connection to %s %s port [%s/*] succeeded!\n", o.host, o.port, network)
	}
	if o.zero {
		return nil
	}
	go send(conn)
	return receive(conn, o)
}

// send copies standard input to conn, a datagram per read with UDP.
func send(conn net.Conn) {
	buf := make([]byte, 64*1024)
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// receive copies what conn returns to standard output until EOF, an idle
// timeout, or o.packets reads.
func receive(conn net.Conn, o options) error {
	buf := make([]byte, 64*1024)
	for got := 0; o.packets == 0 || got < o.packets; got++ {
		if o.timeout > 0 {
			_ = conn.SetReadDeadline(time.Now().Add(o.timeout))
		}
		n, err := conn.Read(buf)
		if n > 0 {
			if _, werr := os.Stdout.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil
			}
			if o.udp {
				// A refused datagram (ICMP port unreachable) ends it
				// quietly, as OpenBSD netcat's UDP mode does.
				return nil
			}
			return err
		}
	}
	return nil
}
