package certificates

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"github.com/nodelet/nodelet/internal/metrics"
)

// rotatingTransport presents the current client certificate at every TLS
// handshake and closes every connection it made when the certificate
// changes, so that requests and watches reconnect with the new one.
//
// The API server authenticates a connection by the certificate presented
// at its handshake; an HTTP/2 connection lives for as long as it is used,
// so without closing it a renewed certificate would only be used by new
// connections, and the old one would be presented until it expired.
type rotatingTransport struct {
	// current returns the certificate to present; nil when there is no
	// valid one.
	current func() *tls.Certificate
	dialer  *connrotation.Dialer
	// last is the certificate connections were last made with, as far as
	// closeOnChange knows: the current one when the transport was made.
	last *tls.Certificate
}

// newRotatingTransport returns a copy of base whose client certificate is
// current() at each handshake, and the transport that does it. base's own
// client certificate settings are dropped; its CA, server name and other
// TLS settings are kept.
func newRotatingTransport(base *rest.Config, current func() *tls.Certificate) (*rest.Config, *rotatingTransport, error) {
	if base.Transport != nil || base.Dial != nil {
		return nil, nil, errors.New("rotating client certificates: the REST config already has a transport or dialer")
	}
	t := &rotatingTransport{
		current: current,
		dialer:  connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		last:    current(),
	}
	tlsBase := rest.CopyConfig(base)
	tlsBase.CertData, tlsBase.KeyData, tlsBase.CertFile, tlsBase.KeyFile = nil, nil, "", ""
	tlsConfig, err := rest.TLSConfigFor(tlsBase)
	if err != nil {
		return nil, nil, fmt.Errorf("rotating client certificates: building the TLS configuration: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = t.clientCertificate
	proxy := base.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	cfg := rest.CopyConfig(base)
	// rest refuses a custom transport beside TLS settings: they are all in
	// the transport now.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         t.dialer.DialContext,
	})
	return cfg, t, nil
}

// clientCertificate is the TLS client's GetClientCertificate. Without a
// valid certificate it presents none rather than failing the handshake:
// the API server then answers 401, which the caller sees and retries.
func (t *rotatingTransport) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := t.current(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil
}

// closeOnChange checks current every period until ctx ends, and closes
// every connection when the certificate it returns is a new one. It runs
// once at a time. It
// returns an error when there has been no valid certificate for
// maxWithout (0: never), so that the process can exit and bootstrap again
// on its next start.
func (t *rotatingTransport) closeOnChange(ctx context.Context, log logr.Logger, period, maxWithout time.Duration) error {
	validSince := time.Now()
	err := wait.PollUntilContextCancel(ctx, period, false, func(context.Context) (bool, error) {
		cur := t.current()
		if cur != nil {
			validSince = time.Now()
			if cur.Leaf != nil {
				metrics.ClientCertificateTTL.Set(time.Until(cur.Leaf.NotAfter).Seconds())
			}
		} else if maxWithout > 0 && time.Since(validSince) > maxWithout {
			return false, fmt.Errorf("no valid client certificate for %s", maxWithout)
		}
		if cur == nil || cur == t.last {
			return false, nil
		}
		t.last = cur
		log.Info("Client certificate rotated, closing connections to the API server to use it", "expiration", expiration(cur))
		t.dialer.CloseAll()
		return false, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// expiration is c's NotAfter, or the zero time when c was not parsed.
func expiration(c *tls.Certificate) time.Time {
	if c.Leaf == nil {
		return time.Time{}
	}
	return c.Leaf.NotAfter
}
