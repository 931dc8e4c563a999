package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

const (
	defaultURLTimeout = 10 * time.Second
	// maxManifestBytes bounds what URLSource reads of a response.
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
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: defaultURLTimeout}
	}
	ticker := time.NewTicker(s.Period)
	defer ticker.Stop()
	for {
		s.sync(ctx, client)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
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
			s.Log.Info("Could not read static pods from URL", "url", s.URL, "error", msg)
			if s.Report != nil {
				s.Report(Problem{Source: SourceHTTP, Origin: s.URL, Err: err})
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
	s.Log.V(2).Info("Static pods of URL changed", "url", s.URL, "pods", len(pods))
	if s.Update != nil {
		s.Update(pods)
	}
}

// fetch gets and decodes the manifest at the URL.
func (s *URLSource) fetch(ctx context.Context, client *http.Client) ([]*corev1.Pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("%s: building request: %w", s.URL, err)
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
		return nil, fmt.Errorf("%s: requesting static pods: %w", s.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading response: %w", s.URL, err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s: response status %s", s.URL, resp.Status)
	case len(data) == 0:
		return nil, fmt.Errorf("%s: %w", s.URL, errEmptyBody)
	case len(data) > maxManifestBytes:
		return nil, fmt.Errorf("%s: response larger than %d bytes", s.URL, maxManifestBytes)
	}
	return Decode(data, SourceHTTP, s.URL, s.NodeName)
}
