package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	defaultURLTimeout = 10 * time.Second
	// maxManifestBytes bounds what a source reads of a manifest file or a
	// response.
	maxManifestBytes = 10 << 20
)

// errEmptyBody is a 200 answer with no manifest.
var errEmptyBody = errors.New("zero-length data received")

// URLSource polls URL every Period, sending Header, and calls Update with the
// pods of the response (a Pod, PodList or List, source "http") at the first
// success and whenever they differ from the last call. A failed request, a
// status other than 200 or a manifest that does not decode is reported (once
// until the next success or a different failure) and keeps the last set, as
// the kubelet does; Update is not called before the first answer, so a
// caller can tell the source has not been read yet. A 200 answer with an
// empty body is, as for the kubelet, an empty set, and reported. Update and
// Report are called from Start's goroutine, one at a time.
type URLSource struct {
	URL      string
	Header   http.Header
	NodeName string
	Period   time.Duration
	Client   *http.Client // nil: a client with a 10 s timeout
	Update   func(pods []*corev1.Pod)
	Report   func(Problem)
	Log      logr.Logger

	sent       lastSet
	lastFailed string
}

// Start polls the URL until ctx ends.
func (s *URLSource) Start(ctx context.Context) error {
	if s.URL == "" {
		return errors.New("static pod URL is empty")
	}
	if s.Period <= 0 {
		return fmt.Errorf("static pod URL check period %v is not positive", s.Period)
	}
	client := &http.Client{Timeout: defaultURLTimeout}
	if s.Client != nil {
		c := *s.Client
		client = &c
	}
	client.CheckRedirect = s.checkRedirect
	wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) { s.sync(ctx, client) }, s.Period)
	return nil
}

// sync fetches the URL once and calls Update or Report.
func (s *URLSource) sync(ctx context.Context, client *http.Client) {
	pods, err := s.fetch(ctx, client)
	if errors.Is(err, errEmptyBody) {
		// As the kubelet: an empty answer is an empty set, and reported.
		s.update(nil)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if msg := err.Error(); msg != s.lastFailed {
			s.lastFailed = msg
			s.Log.Info("Could not read static pods from URL", "url", redactURL(s.URL), "error", msg)
			if s.Report != nil {
				s.Report(Problem{Source: SourceHTTP, Origin: redactURL(s.URL), Err: err})
			}
		}
		return
	}
	s.lastFailed = ""
	s.update(pods)
}

// update calls Update unless the pods are those of the last call.
func (s *URLSource) update(pods []*corev1.Pod) {
	if !s.sent.changed(pods) {
		return
	}
	s.Log.V(2).Info("Static pods of URL changed", "url", redactURL(s.URL), "pods", len(pods))
	if s.Update != nil {
		s.Update(pods)
	}
}

// fetch gets and decodes the manifest at the URL. Its errors name the URL
// without credentials (see redactURL): they go into Events.
func (s *URLSource) fetch(ctx context.Context, client *http.Client) ([]*corev1.Pod, error) {
	shown := redactURL(s.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("%s: building request: %w", shown, unwrapURLError(err))
	}
	for k, vs := range s.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	// Go sends req.Host, not a Host header.
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: requesting static pods: %w", shown, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading response: %w", shown, err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s: response status %s", shown, resp.Status)
	case len(data) == 0:
		return nil, fmt.Errorf("%s: %w", shown, errEmptyBody)
	case len(data) > maxManifestBytes:
		return nil, fmt.Errorf("%s: response larger than %d bytes", shown, maxManifestBytes)
	}
	// The whole URL makes the UIDs, as before; errors show it redacted.
	return decode(data, SourceHTTP, s.URL, shown, s.NodeName)
}

// maxRedirects is how many redirects a fetch follows, as Go's default.
const maxRedirects = 10

// checkRedirect follows a redirect of the static pod URL, but never from
// https to http (a manifest runs as root on the node: its answer must not
// come over plain HTTP once TLS was asked for), and without the configured
// headers (staticPodURLHeader, which often carry a token) to any host but
// the URL's own. Go itself drops only Authorization, Cookie and
// WWW-Authenticate there.
func (s *URLSource) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	first := via[0].URL
	if first.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing a redirect from https to %s", req.URL.Scheme)
	}
	if !strings.EqualFold(req.URL.Host, first.Host) {
		for k := range s.Header {
			req.Header.Del(k)
		}
	}
	return nil
}

// redactURL is raw for Events and logs: without its user information and
// query, either of which may hold a credential.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// unwrapURLError drops the *url.Error around err, which repeats the URL
// with its query (Go strips only a password).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
