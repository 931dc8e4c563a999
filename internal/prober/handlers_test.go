package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	remote "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"
)

// fakeExec answers ExecSync with fixed output and error and records the
// command.
type fakeExec struct {
	stdout, stderr string
	err            error
	gotID          string
	gotCmd         []string
	gotTimeout     time.Duration
}

func (f *fakeExec) ExecSync(_ context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	f.gotID, f.gotCmd, f.gotTimeout = id, cmd, timeout
	return []byte(f.stdout), []byte(f.stderr), f.err
}

func TestExecProbe(t *testing.T) {
	exitErr := func(code int) error {
		return fmt.Errorf("running command in container c1: %w", utilexec.CodeExitError{Err: errors.New("exited"), Code: code})
	}
	tests := []struct {
		name    string
		fake    fakeExec
		want    outcome
		output  string
		wantErr bool
	}{
		{name: "exit 0", fake: fakeExec{stdout: "ok\n"}, want: success, output: "ok\n"},
		{name: "non-zero exit", fake: fakeExec{stdout: "out ", stderr: "err", err: exitErr(1)}, want: failure, output: "out err"},
		{name: "timeout", fake: fakeExec{err: fmt.Errorf("running command: %w", remote.ErrCommandTimedOut)}, want: failure, output: `command "check v $(OTHER) $ $(FROM)" timed out after 3s`},
		{name: "runtime error", fake: fakeExec{err: errors.New("connection refused")}, want: failure, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandlers(&tt.fake)
			c := &corev1.Container{Name: "app", Env: []corev1.EnvVar{
				{Name: "NAME", Value: "v"},
				{Name: "FROM", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			}}
			p := &corev1.Probe{TimeoutSeconds: 3, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{"check", "$(NAME)", "$(OTHER)", "$$", "$(FROM)"},
			}}}
			got, out, err := h.run(context.Background(), target{container: c, containerID: "c1", probe: p})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want || out != tt.output {
				t.Errorf("= %v %q, want %v %q", got, out, tt.want, tt.output)
			}
			if want := []string{"check", "v", "$(OTHER)", "$", "$(FROM)"}; strings.Join(tt.fake.gotCmd, "|") != strings.Join(want, "|") {
				t.Errorf("command %q, want %q", tt.fake.gotCmd, want)
			}
			if tt.fake.gotID != "c1" || tt.fake.gotTimeout != 3*time.Second {
				t.Errorf("ExecSync(%q, timeout %v)", tt.fake.gotID, tt.fake.gotTimeout)
			}
		})
	}
}

func hostPort(t *testing.T, rawURL string) (string, int) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return u.Hostname(), port
}

func httpTarget(host string, port intstr.IntOrString, mod func(*corev1.HTTPGetAction)) target {
	g := &corev1.HTTPGetAction{Path: "/healthz", Port: port}
	if mod != nil {
		mod(g)
	}
	return target{
		podIP:     host,
		container: &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port.IntVal}}},
		probe:     &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: g}},
	}
}

func TestHTTPGetProbe(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer other.Close()
	var lastReq *http.Request
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		lastReq = r
		fmt.Fprint(w, "fine")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/healthz", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		// Another host: 127.0.0.1 and localhost differ by name.
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1), http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	host, port := hostPort(t, srv.URL)
	_, tlsPort := hostPort(t, tlsSrv.URL)

	h := newHandlers(noRunner{})
	tests := []struct {
		name   string
		tg     target
		want   outcome
		output string
	}{
		{name: "200 on the pod IP by port number", tg: httpTarget(host, intstr.FromInt(port), nil), want: success, output: "fine"},
		{name: "by port name", tg: httpTarget(host, intstr.FromInt(port), func(g *corev1.HTTPGetAction) { g.Port = intstr.FromString("http") }), want: success},
		{name: "on the handler's host", tg: httpTarget("", intstr.FromInt(port), func(g *corev1.HTTPGetAction) { g.Host = host }), want: success},
		{name: "503", tg: httpTarget(host, intstr.FromInt(port), func(g *corev1.HTTPGetAction) { g.Path = "/fail" }), want: failure, output: "HTTP probe failed with statuscode: 503"},
		{name: "same-host redirect followed", tg: httpTarget(host, intstr.FromInt(port), func(g *corev1.HTTPGetAction) { g.Path = "/moved" }), want: success, output: "fine"},
		{name: "redirect elsewhere not followed", tg: httpTarget(host, intstr.FromInt(port), func(g *corev1.HTTPGetAction) { g.Path = "/away" }), want: warning},
		{name: "timeout", tg: httpTarget(host, intstr.FromInt(port), func(g *corev1.HTTPGetAction) { g.Path = "/slow" }), want: failure},
		{name: "https without verifying the certificate", tg: httpTarget(host, intstr.FromInt(tlsPort), func(g *corev1.HTTPGetAction) { g.Scheme = corev1.URISchemeHTTPS }), want: success, output: "fine"},
		{name: "nothing listening", tg: httpTarget(host, intstr.FromInt(closedPort(t)), nil), want: failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, out, err := h.run(context.Background(), tt.tg)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || (tt.output != "" && out != tt.output) {
				t.Errorf("= %v %q, want %v %q", got, out, tt.want, tt.output)
			}
		})
	}

	t.Run("headers", func(t *testing.T) {
		tg := httpTarget(host, intstr.FromInt(port), func(g *corev1.HTTPGetAction) {
			g.Path = "/healthz?x=1"
			g.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Custom", Value: "a"}, {Name: "X-Custom", Value: "b"}, {Name: "Host", Value: "example.test"}}
		})
		if got, _, _ := h.run(context.Background(), tg); got != success {
			t.Fatalf("= %v", got)
		}
		if ua := lastReq.Header.Get("User-Agent"); ua != "kube-probe/1.37" {
			t.Errorf("User-Agent %q", ua)
		}
		if a := lastReq.Header.Get("Accept"); a != "*/*" {
			t.Errorf("Accept %q", a)
		}
		if v := lastReq.Header.Values("X-Custom"); strings.Join(v, ",") != "a,b" {
			t.Errorf("X-Custom %q", v)
		}
		if lastReq.Host != "example.test" || lastReq.URL.RawQuery != "x=1" {
			t.Errorf("Host %q, query %q", lastReq.Host, lastReq.URL.RawQuery)
		}
		tg.probe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "user-agent", Value: "mine"}}
		h.run(context.Background(), tg) //nolint:errcheck // checked through the request
		if ua := lastReq.Header.Get("User-Agent"); ua != "mine" {
			t.Errorf("User-Agent %q, want the user's", ua)
		}
	})

	t.Run("no pod IP is an error", func(t *testing.T) {
		if _, _, err := h.run(context.Background(), httpTarget("", intstr.FromInt(port), nil)); err == nil {
			t.Error("no error")
		}
	})
	t.Run("unknown port name is an error", func(t *testing.T) {
		tg := httpTarget(host, intstr.FromInt(port), func(g *corev1.HTTPGetAction) { g.Port = intstr.FromString("nope") })
		if _, _, err := h.run(context.Background(), tg); err == nil {
			t.Error("no error")
		}
	})
}

// closedPort returns a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestTCPSocketProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open := l.Addr().(*net.TCPAddr).Port
	h := newHandlers(noRunner{})
	tcp := func(host string, port intstr.IntOrString) target {
		return target{
			podIP:     "127.0.0.1",
			container: &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "svc", ContainerPort: int32(open)}}},
			probe:     &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: host, Port: port}}},
		}
	}
	for name, tt := range map[string]struct {
		tg   target
		want outcome
	}{
		"open port":         {tcp("", intstr.FromInt(open)), success},
		"open port by name": {tcp("127.0.0.1", intstr.FromString("svc")), success},
		"closed port":       {tcp("", intstr.FromInt(closedPort(t))), failure},
	} {
		t.Run(name, func(t *testing.T) {
			got, out, err := h.run(context.Background(), tt.tg)
			if err != nil || got != tt.want {
				t.Errorf("= %v %q %v, want %v", got, out, err, tt.want)
			}
		})
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l) //nolint:errcheck // stopped below
	defer srv.Stop()
	port := int32(l.Addr().(*net.TCPAddr).Port)

	plain := grpc.NewServer() // no health service
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go plain.Serve(pl) //nolint:errcheck // stopped below
	defer plain.Stop()

	h := newHandlers(noRunner{})
	probe := func(port int32, service *string) target {
		return target{podIP: "127.0.0.1", container: &corev1.Container{Name: "app"},
			probe: &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port, Service: service}}}}
	}
	tests := []struct {
		name   string
		tg     target
		want   outcome
		output string
	}{
		{name: "overall health", tg: probe(port, nil), want: success},
		{name: "serving service", tg: probe(port, ptr.To("up")), want: success},
		{name: "not serving", tg: probe(port, ptr.To("down")), want: failure, output: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service", tg: probe(port, ptr.To("nope")), want: failure},
		{name: "no health service", tg: probe(int32(pl.Addr().(*net.TCPAddr).Port), nil), want: failure},
		{name: "nothing listening", tg: probe(int32(closedPort(t)), nil), want: failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, out, err := h.run(context.Background(), tt.tg)
			if err != nil || got != tt.want || (tt.output != "" && out != tt.output) {
				t.Errorf("= %v %q %v, want %v %q", got, out, err, tt.want, tt.output)
			}
		})
	}
}
