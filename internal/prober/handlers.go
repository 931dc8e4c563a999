package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	remote "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"

	"github.com/nodelet/nodelet/internal/podspec"
)

// UserAgent is the User-Agent of HTTP and gRPC probes, the kubelet's.
const UserAgent = "kube-probe/1.37"

// maxOutput bounds the probe output kept for events and logs.
const maxOutput = 10 * 1024

// maxRedirects bounds the same-host redirects an HTTP probe follows.
const maxRedirects = 10

// outcome is what one run of a probe handler found.
type outcome int

const (
	success outcome = iota
	// warning is a success with something worth telling the user (an
	// HTTP redirect to another host that was not followed).
	warning
	failure
)

// target is what one probe run needs to know about its container.
type target struct {
	// podIP is the host of httpGet, tcpSocket and grpc handlers without
	// their own host.
	podIP       string
	container   *corev1.Container
	containerID string
	probe       *corev1.Probe
}

// probeFunc runs one probe. An error means the probe could not be run at
// all; its result is not counted.
type probeFunc func(ctx context.Context, t target) (outcome, string, error)

// CommandRunner runs a command in a container; cri.Runtime implements it.
// A command that exits non-zero returns an error wrapping a
// k8s.io/utils/exec.ExitError, one that times out an error wrapping
// cri-client's ErrCommandTimedOut.
type CommandRunner interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// handlers runs probe handlers; the zero value is not usable, see newHandlers.
type handlers struct {
	runner CommandRunner
	// transport is shared by every HTTP probe. Keep-alives are off so that
	// probes do not hold connections to the containers they check.
	transport *http.Transport
}

func newHandlers(runner CommandRunner) *handlers {
	return &handlers{
		runner: runner,
		transport: &http.Transport{
			// Probes go to pod IPs: never through a proxy.
			Proxy:              nil,
			DisableKeepAlives:  true,
			DisableCompression: true,
			// As the kubelet: HTTPS probes do not verify the certificate.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes check liveness, not identity
		},
	}
}

// run runs the probe's handler against its target.
func (h *handlers) run(ctx context.Context, t target) (outcome, string, error) {
	timeout := time.Duration(valueOr(t.probe.TimeoutSeconds, defaultTimeoutSeconds)) * time.Second
	ph := t.probe.ProbeHandler
	switch {
	case ph.Exec != nil:
		return h.exec(ctx, t.containerID, expandCommand(ph.Exec.Command, t.container), timeout)
	case ph.HTTPGet != nil:
		host, port, err := t.endpoint(ph.HTTPGet.Host, ph.HTTPGet.Port)
		if err != nil {
			return failure, "", err
		}
		return h.httpGet(ctx, ph.HTTPGet, host, port, timeout)
	case ph.TCPSocket != nil:
		host, port, err := t.endpoint(ph.TCPSocket.Host, ph.TCPSocket.Port)
		if err != nil {
			return failure, "", err
		}
		return tcpSocket(ctx, host, port, timeout)
	case ph.GRPC != nil:
		if t.podIP == "" {
			return failure, "", errors.New("the pod has no IP yet")
		}
		if ph.GRPC.Port <= 0 || ph.GRPC.Port > 65535 {
			return failure, "", fmt.Errorf("invalid port number: %d", ph.GRPC.Port)
		}
		service := ""
		if ph.GRPC.Service != nil {
			service = *ph.GRPC.Service
		}
		return grpcHealth(ctx, t.podIP, int(ph.GRPC.Port), service, timeout)
	default:
		return failure, "", errors.New("missing probe handler")
	}
}

// exec runs the command in the container: exit code 0 is success, another
// exit code or a timeout is failure, any other error an error.
func (h *handlers) exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (outcome, string, error) {
	stdout, stderr, err := h.runner.ExecSync(ctx, containerID, cmd, timeout)
	out := limit(string(stdout) + string(stderr))
	if err == nil {
		return success, out, nil
	}
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitStatus() == 0 {
			return success, out, nil
		}
		return failure, out, nil
	}
	if errors.Is(err, remote.ErrCommandTimedOut) || errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return failure, fmt.Sprintf("command %q timed out after %s", strings.Join(cmd, " "), timeout), nil
	}
	return failure, "", err
}

// httpGet sends one GET: 2xx and 3xx are success, anything else or no
// response failure. Redirects to the same host are followed; a redirect
// elsewhere ends the probe with a warning.
func (h *handlers) httpGet(ctx context.Context, g *corev1.HTTPGetAction, host string, port int, timeout time.Duration) (outcome, string, error) {
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	if u.Path == "" {
		u.Path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return failure, err.Error(), nil
	}
	req.Header = probeHeaders(g.HTTPHeaders)
	if v := req.Header.Get("Host"); v != "" {
		req.Host = v
	}
	client := &http.Client{Timeout: timeout, Transport: h.transport, CheckRedirect: sameHostRedirects}
	resp, err := client.Do(req)
	if err != nil {
		return failure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOutput))
	if err != nil {
		return failure, err.Error(), nil
	}
	switch {
	case resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusMultipleChoices:
		return success, string(body), nil
	case resp.StatusCode >= http.StatusMultipleChoices && resp.StatusCode < http.StatusBadRequest:
		return warning, fmt.Sprintf("Probe terminated redirects, Response body: %s", body), nil
	default:
		return failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
	}
}

// probeHeaders returns the request headers: the user's, with the probe's
// User-Agent and Accept unless the user set them.
func probeHeaders(user []corev1.HTTPHeader) http.Header {
	hdr := http.Header{}
	for _, h := range user {
		hdr.Add(h.Name, h.Value)
	}
	if _, ok := hdr["User-Agent"]; !ok {
		hdr.Set("User-Agent", UserAgent)
	}
	if _, ok := hdr["Accept"]; !ok {
		hdr.Set("Accept", "*/*")
	}
	return hdr
}

func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// tcpSocket succeeds when a TCP connection opens within the timeout.
func tcpSocket(ctx context.Context, host string, port int, timeout time.Duration) (outcome, string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return failure, err.Error(), nil
	}
	_ = conn.Close()
	return success, "", nil
}

// grpcHealth calls grpc.health.v1.Health/Check for service over plain
// text: SERVING is success, anything else failure.
func grpcHealth(ctx context.Context, host string, port int, service string, timeout time.Duration) (outcome, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(port)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(UserAgent),
		grpc.WithNoProxy(),
	)
	if err != nil {
		return failure, err.Error(), nil
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return failure, fmt.Sprintf("this server does not implement the grpc health protocol (grpc.health.v1.Health): %v", err), nil
		case codes.DeadlineExceeded:
			return failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		default:
			return failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
		}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return success, "", nil
}

// expandCommand replaces $(NAME) in the command with the value of the
// container's environment variable NAME when that value is given literally
// in the spec; $$ stands for a literal $. Other references stay as they are,
// as the kubelet expands probe commands.
func expandCommand(cmd []string, c *corev1.Container) []string {
	if c == nil || len(c.Env) == 0 {
		return cmd
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, arg := range cmd {
		out[i] = podspec.ExpandVars(arg, func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	}
	return out
}

func limit(s string) string {
	if len(s) > maxOutput {
		return s[:maxOutput]
	}
	return s
}

// endpoint is where a network probe connects: host, or the pod's IP when
// host is empty, and the resolved port.
func (t target) endpoint(host string, port intstr.IntOrString) (string, int, error) {
	if host == "" {
		host = t.podIP
	}
	if host == "" {
		return "", 0, errors.New("the pod has no IP yet")
	}
	n, err := podspec.ResolvePort(port, t.container)
	if err != nil {
		return "", 0, err
	}
	return host, n, nil
}
