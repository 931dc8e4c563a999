package nodeapi

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/certificates"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/stats"
)

// CertDir is where the self-signed serving certificate is kept, under the
// root directory.
const CertDir = "pki"

// NewFromConfig builds the node API server of cfg over the manager's
// node-scoped cache and client: the serving certificate, the client CAs,
// the token and access reviews. configz serves /configz; volumes, when
// not nil, gives the pods' volume stats to /stats/summary.
func NewFromConfig(cfg *v1alpha1.NodeletConfiguration, mgr ctrl.Manager, rt cri.Runtime, configz http.Handler, volumes stats.VolumeStatsCache) (*Server, error) {
	sc := cfg.Server
	log := ctrl.Log.WithName("certificates")
	nodeIP := startNodeIP(cfg.NodeIP)
	serving, err := certificates.NewServing(certificates.ServingOptions{
		CertFile:  sc.TLSCertFile,
		KeyFile:   sc.TLSPrivateKeyFile,
		Dir:       filepath.Join(cfg.RootDir, CertDir),
		NodeName:  cfg.NodeName,
		Start:     certificates.ServingSANs(cfg.NodeName, nodeIP, nil),
		Addresses: nodeAddresses(mgr.GetClient(), cfg.NodeName, nodeIP),
		Bootstrap: cfg.ServerTLSBootstrap,
		Config:    mgr.GetConfig(),
		Logger:    log,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(serving); err != nil {
		return nil, fmt.Errorf("adding the serving certificate: %w", err)
	}
	if warn, kv := clientCAWarning(sc); warn {
		ctrl.Log.WithName("server").Info("No client CA: client certificates are not accepted, the API server's kubelet client certificate gets 401 (kubectl logs, exec, port-forward); set server.clientCAFile", kv...)
	}
	authn := Authenticator{Anonymous: sc.Anonymous.Enabled, CacheTTL: ttl(sc.Webhook.CacheTTL)}
	if sc.ClientCAFile != "" {
		cas, err := certificates.NewClientCAs(sc.ClientCAFile, log)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(cas); err != nil {
			return nil, fmt.Errorf("adding the client CA bundle: %w", err)
		}
		authn.ClientCAsFunc = cas.Pool
	}
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
	tlsConfig, err := TLSConfig(serving.GetCertificate, &sc)
	if err != nil {
		return nil, err
	}
	summary := &stats.Provider{
		NodeName: cfg.NodeName, Pods: mgr.GetClient(), Runtime: rt, Host: nodeinfo.OSHost{},
		RootDir: cfg.RootDir, PodLogsDir: cfg.PodLogsDir, Volumes: volumes,
	}
	return New(Options{
		Address:       sc.Address,
		Port:          port,
		TLS:           tlsConfig,
		Authenticator: NewAuthenticator(authn),
		Authorizer:    NewAuthorizer(authz),
		NodeName:      cfg.NodeName,
		Pods:          mgr.GetClient(),
		Runtime:       rt,
		Stats:         summary,
		Metrics:       ctrlmetrics.Registry,
		Configz:       configz,
		IdleTimeout:   sc.IdleTimeout.Duration,
		CheckpointDir: checkpointDir(cfg),
		Profiling:     cfg.EnableProfilingHandler,

		StreamIdleTimeout: cfg.StreamingConnectionIdleTimeout.Duration,
	}), nil
}

// NewReadOnlyFromConfig builds the read-only port's server of cfg, or
// returns nil when server.readOnlyPort is 0.
func NewReadOnlyFromConfig(cfg *v1alpha1.NodeletConfiguration, mgr ctrl.Manager, rt cri.Runtime, volumes stats.VolumeStatsCache) *Server {
	if cfg.Server.ReadOnlyPort == 0 {
		return nil
	}
	return New(Options{
		Address:  cfg.Server.Address,
		Port:     cfg.Server.ReadOnlyPort,
		ReadOnly: true,
		NodeName: cfg.NodeName,
		Pods:     mgr.GetClient(),
		Runtime:  rt,
		Stats: &stats.Provider{
			NodeName: cfg.NodeName, Pods: mgr.GetClient(), Runtime: rt, Host: nodeinfo.OSHost{},
			RootDir: cfg.RootDir, PodLogsDir: cfg.PodLogsDir, Volumes: volumes,
		},
		Metrics:     ctrlmetrics.Registry,
		IdleTimeout: cfg.Server.IdleTimeout.Duration,
	})
}

// checkpointDir is where /checkpoint writes, or "" when the
// ContainerCheckpoint gate is off.
func checkpointDir(cfg *v1alpha1.NodeletConfiguration) string {
	if !features.Enabled(features.ContainerCheckpoint) {
		return ""
	}
	return filepath.Join(cfg.RootDir, CheckpointDirName)
}

// clientCAWarning says whether the node API of sc is one the API server
// cannot call with its kubelet client certificate: no clientCAFile, so a
// request authenticates only with a bearer token (or not at all), and
// kubectl logs and exec through the API server get 401. kv are the
// key/values to log with it.
func clientCAWarning(sc v1alpha1.ServerConfig) (bool, []any) {
	if sc.ClientCAFile != "" {
		return false, nil
	}
	webhook := sc.Webhook.Enabled == nil || *sc.Webhook.Enabled
	return true, []any{"field", "server.clientCAFile", "webhookTokens", webhook, "anonymous", sc.Anonymous.Enabled}
}

// ttl is a configured cache lifetime; unset (an undefaulted configuration)
// is no caching.
func ttl(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

// startNodeIP is the node's address before the Node reports it: nodeIP
// when configured, else the one nodelet will report (see nodeinfo), or ""
// when none can be found.
func startNodeIP(nodeIP string) string {
	if nodeIP != "" {
		return nodeIP
	}
	if ip := nodeinfo.NodeIP(nodeinfo.OSHost{}, func(string, error) {}); ip != nil {
		return ip.String()
	}
	return ""
}

// nodeAddressTimeout bounds one read of the Node from the cache.
const nodeAddressTimeout = time.Second

// nodeAddresses returns the names the serving certificate must be for:
// the node name, nodeIP and the addresses on the Node in the manager's
// cache, or false while the Node reports none.
func nodeAddresses(c client.Reader, nodeName, nodeIP string) func() (certificates.SANs, bool) {
	return func() (certificates.SANs, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), nodeAddressTimeout)
		defer cancel()
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil || len(node.Status.Addresses) == 0 {
			return certificates.SANs{}, false
		}
		return certificates.ServingSANs(nodeName, nodeIP, node.Status.Addresses), true
	}
}
