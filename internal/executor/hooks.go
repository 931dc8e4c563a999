package executor

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

	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Event reasons of failed lifecycle hooks, as the kubelet emits them. Their
// messages never carry the hook's output, which may hold secrets.
const (
	EventFailedPostStartHook = "FailedPostStartHook"
	EventFailedPreStopHook   = "FailedPreStopHook"
)

const (
	// postStartTimeout bounds a postStart hook (a sleep hook gets its own
	// length when that is longer). The kubelet sets no bound; a hook that
	// never returns would hold the pod's start for ever.
	postStartTimeout = 2 * time.Minute
	// hookUserAgent is the User-Agent of HTTP hooks, the kubelet's.
	hookUserAgent = "kube-lifecycle/1.37"
	// maxHookRedirects bounds the same-host redirects an HTTP hook follows.
	maxHookRedirects = 10
	// maxHookBody is how much of an HTTP hook's response is read (and
	// discarded) so that the connection can be reused.
	maxHookBody = 10 * 1024
)

// hookClient sends the HTTP hooks as the kubelet's does: the certificate of
// an HTTPS hook is not verified, and a redirect to another host is not
// followed (its response ends the hook). Each request is bounded by its
// hook's deadline through its context.
var hookClient = &http.Client{
	Transport: &http.Transport{
		Proxy:             nil,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // hooks reach the pod's own endpoint, as the kubelet's do
		DisableKeepAlives: true,
	},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= maxHookRedirects {
			return fmt.Errorf("stopped after %d redirects", maxHookRedirects)
		}
		return nil
	},
}

// HookError is a failed lifecycle hook. Its text is the kubelet's message
// for the hook's kind (the message a container waiting after a failed
// postStart hook shows); Err is the cause.
type HookError struct {
	Message string
	Err     error
}

func (e *HookError) Error() string { return e.Message }

func (e *HookError) Unwrap() error { return e.Err }

// hookTarget is the container instance a hook runs for.
type hookTarget struct {
	pod *v1.Pod
	// name of the container; spec is its spec, nil when the pod's spec no
	// longer has it (named ports then cannot be resolved).
	name string
	spec *v1.Container
	// id of the container instance (exec hooks run in it).
	id string
	// podIP is the host of an HTTP hook without one.
	podIP string
}

// runHook runs one lifecycle handler (exec through the runtime's ExecSync,
// httpGet, or sleep) for at most timeout. A hook still running at the
// deadline is abandoned and fails with an error wrapping
// context.DeadlineExceeded. A failure is a *HookError.
func (e *Executor) runHook(ctx context.Context, t hookTarget, h *v1.LifecycleHandler, timeout time.Duration) error {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		err  error
		kind string
	)
	switch {
	case h.Exec != nil:
		var stdout, stderr []byte
		stdout, stderr, err = e.Runtime.ExecSync(hctx, t.id, h.Exec.Command, timeout)
		if err != nil {
			if exitErr := utilexec.ExitError(nil); errors.As(err, &exitErr) {
				// The runtime's own words: "command '…' exited with 1: …".
				err = exitErr
			}
			err = deadlineErr(ctx, hctx, timeout, err)
			return &HookError{Err: err, Message: fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, t.name, podDesc(t.pod), err, string(stdout)+string(stderr))}
		}
		return nil
	case h.HTTPGet != nil:
		kind = fmt.Sprintf("HTTP lifecycle hook (%s)", h.HTTPGet.Path)
		err = httpHook(hctx, t, h.HTTPGet)
	case h.Sleep != nil:
		kind = fmt.Sprintf("Sleep lifecycle hook (%d)", h.Sleep.Seconds)
		timer := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-hctx.Done():
			err = errors.New("container terminated before sleep hook finished")
		}
	default:
		err = errors.New("invalid handler: no action set")
		return &HookError{Err: err, Message: fmt.Sprintf("Cannot run handler: %v", err)}
	}
	if err == nil {
		return nil
	}
	err = deadlineErr(ctx, hctx, timeout, err)
	return &HookError{Err: err, Message: fmt.Sprintf("%s for Container %q in Pod %q failed - error: %v", kind, t.name, podDesc(t.pod), err)}
}

// deadlineErr marks err as the hook's deadline passing when that, and not
// the caller, ended the hook.
func deadlineErr(ctx, hctx context.Context, timeout time.Duration, err error) error {
	if errors.Is(hctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("not finished within %s: %w (%w)", timeout, context.DeadlineExceeded, err)
	}
	return err
}

// httpHook sends the GET of an HTTP hook to its host (the pod's IP unless
// set) and port (a number or the name of one of the container's ports).
// Like the kubelet, it fails only when no response comes; the status code
// is not judged.
func httpHook(ctx context.Context, t hookTarget, g *v1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		host = t.podIP
	}
	if host == "" {
		return errors.New("failed to find networking container: the pod has no IP")
	}
	port, err := podspec.ResolvePort(g.Port, t.spec)
	if err != nil {
		return err
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = strings.ToLower(string(g.Scheme))
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", hookUserAgent)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "*/*")
	}
	if v := req.Header.Get("Host"); v != "" {
		req.Host = v
	}
	resp, err := hookClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxHookBody))
	return resp.Body.Close()
}

// podDesc is how the kubelet names a pod in hook messages: name_namespace(uid).
func podDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// runPostStart runs the postStart hook of a container that just started.
// A failed hook is reported with a FailedPostStartHook Event and the
// container is killed within grace seconds (its preStop hook runs, as the
// kubelet's does); the returned *HookError is the failure to record. When
// ctx ends meanwhile, ctx's error is returned and nothing is reported.
func (e *Executor) runPostStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, podIPs []string, grace int64) error {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	h := c.Lifecycle.PostStart
	timeout := postStartTimeout
	if h.Sleep != nil {
		timeout = max(timeout, time.Duration(h.Sleep.Seconds)*time.Second+time.Second)
	}
	t := hookTarget{pod: pod, name: c.Name, spec: c, id: id, podIP: firstIP(podIPs, pod)}
	err := e.runHook(ctx, t, h, timeout)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	log.FromContext(ctx).Error(err, "PostStart hook failed", "container", c.Name, "id", id)
	e.Recorder.Event(pod, v1.EventTypeWarning, EventFailedPostStartHook, "PostStartHook failed")
	var preStop *v1.LifecycleHandler
	if c.Lifecycle != nil {
		preStop = c.Lifecycle.PreStop
	}
	if kerr := e.killContainer(ctx, pod, id, c.Name, "FailedPostStartHook", preStop, grace); kerr != nil {
		log.FromContext(ctx).Error(kerr, "Unable to kill container after its postStart hook failed", "container", c.Name, "id", id)
	}
	return err
}

// runPreStop runs a preStop hook for at most timeout seconds. A failing
// hook is reported with an Event and does not stop the kill; a hook still
// running when the grace period ends is left behind, as the kubelet does.
func (e *Executor) runPreStop(ctx context.Context, pod *v1.Pod, rt state.PodRuntime, id, name string, h *v1.LifecycleHandler, timeout int64) {
	if h == nil {
		return
	}
	t := hookTarget{pod: pod, name: name, spec: podspec.ContainerSpec(pod, name), id: id, podIP: podIP(pod, rt)}
	err := e.runHook(ctx, t, h, time.Duration(timeout)*time.Second)
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded):
		log.FromContext(ctx).V(1).Info("PreStop hook not completed in grace period", "container", name, "gracePeriod", timeout)
	default:
		log.FromContext(ctx).Error(err, "PreStop hook failed", "container", name)
		e.Recorder.Event(pod, v1.EventTypeWarning, EventFailedPreStopHook, "PreStopHook failed")
	}
}

// firstIP is the host of an HTTP hook of a container just started: the
// sandbox's first IP, else the pod's reported one, else loopback (a
// host-network sandbox reports no IP of its own).
func firstIP(ips []string, pod *v1.Pod) string {
	if len(ips) > 0 {
		return ips[0]
	}
	return podIP(pod, state.PodRuntime{})
}

func podIP(pod *v1.Pod, rt state.PodRuntime) string {
	for _, sb := range rt.Sandboxes {
		if len(sb.IPs) > 0 {
			return sb.IPs[0]
		}
	}
	if pod.Status.PodIP != "" {
		return pod.Status.PodIP
	}
	return "127.0.0.1"
}
