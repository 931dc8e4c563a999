package server

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/certificates"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// CertDir is where the self-signed serving certificate is kept, under the
// root directory.
const CertDir = "pki"

// NewFromConfig builds the node API server of cfg over the manager's
// node-scoped cache and client: the serving certificate, the client CAs,
// the token and access reviews. configz serves /configz.
func NewFromConfig(cfg *v1alpha1.NodeletConfiguration, mgr ctrl.Manager, rt cri.Runtime, configz http.Handler) (*Server, error) {
	sc := cfg.Server
	var ips []net.IP
	if ip := net.ParseIP(cfg.NodeIP); ip != nil {
		ips = append(ips, ip)
	}
	cert, err := certificates.ServingCertificate(sc.TLSCertFile, sc.TLSPrivateKeyFile, filepath.Join(cfg.RootDir, CertDir), cfg.NodeName, ips)
	if err != nil {
		return nil, err
	}
	cas, err := ClientCAPool(sc.ClientCAFile)
	if err != nil {
		return nil, err
	}
	authn := Authenticator{ClientCAs: cas, Anonymous: sc.Anonymous.Enabled, CacheTTL: ttl(sc.Webhook.CacheTTL)}
	if sc.Webhook.Enabled == nil || *sc.Webhook.Enabled {
		authn.Reviewer = mgr.GetClient()
	}
	authz := Authorizer{NodeName: cfg.NodeName,
		AllowTTL: ttl(sc.Authorization.CacheAuthorizedTTL), DenyTTL: ttl(sc.Authorization.CacheUnauthorizedTTL)}
	switch sc.Authorization.Mode {
	case v1alpha1.AuthorizationModeWebhook, "":
		authz.Reviewer = mgr.GetClient()
	case v1alpha1.AuthorizationModeAlwaysAllow:
	default:
		return nil, fmt.Errorf("unknown authorization mode %q", sc.Authorization.Mode)
	}
	port := int32(v1alpha1.DefaultServerPort)
	if sc.Port != nil {
		port = *sc.Port
	}
	stats := &StatsProvider{
		NodeName: cfg.NodeName, Pods: mgr.GetClient(), Runtime: rt, Host: nodeinfo.OSHost{},
		RootDir: cfg.RootDir, PodLogsDir: cfg.PodLogsDir,
	}
	return New(Options{
		Address:       sc.Address,
		Port:          port,
		TLS:           TLSConfig(cert),
		Authenticator: NewAuthenticator(authn),
		Authorizer:    NewAuthorizer(authz),
		NodeName:      cfg.NodeName,
		Pods:          mgr.GetClient(),
		Runtime:       rt,
		Stats:         stats,
		Metrics:       ctrlmetrics.Registry,
		Configz:       configz,
		IdleTimeout:   sc.IdleTimeout.Duration,

		StreamIdleTimeout: cfg.StreamingConnectionIdleTimeout.Duration,
	}), nil
}

// ttl is a configured cache lifetime; unset (an undefaulted configuration)
// is no caching.
func ttl(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
