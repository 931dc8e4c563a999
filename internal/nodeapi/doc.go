// Package nodeapi is nodelet's node API: the HTTPS endpoint on
// server.address:server.port that the API server calls for kubectl logs,
// exec, attach, port-forward and cp, and that metrics-server and monitoring
// scrape, on the kubelet's paths and with the kubelet's answers.
//
// Every request is authenticated (a client certificate signed by
// server.clientCAFile, or a bearer token checked with a TokenReview) and
// authorized with a SubjectAccessReview on the node's nodes subresource
// that the path maps to (proxy, log, stats, metrics, configz, healthz,
// pods), both answers cached as the kubelet caches them; what runs something
// in a container (exec, attach, portForward, run) is create on nodes/proxy
// whatever the method. Failed token reviews are cached briefly, one review
// runs per token at a time, and reviews of new tokens are rate limited (429
// beyond). Logs are read from the CRI log files with
// k8s.io/cri-client/pkg/logs, of the container nodelet's own runtime view
// names (the pod's UID and the container's name), never the pod's status;
// exec, attach and port-forward ask the CRI for a streaming URL and proxy
// the upgraded (SPDY or WebSocket) connection to the runtime's streaming
// server with apimachinery's UpgradeAwareHandler, closing it after
// StreamIdleTimeout without traffic. /stats/summary, /metrics/resource and
// /metrics/cadvisor serve what a stats.Provider (internal/stats) computes.
package nodeapi
