// Command coredns is CoreDNS with only the plugins a cluster's DNS needs, for
// the cluster add-on image the test harness builds (hack/coredns.sh,
// test/utils/addons_images.go). The stock build links every plugin CoreDNS
// has, with the cloud SDKs of route53, azure and clouddns, etcd's client,
// dnstap, geoip and more; a cluster DNS serving cluster.local from the API
// server and forwarding the rest needs these:
//
//   - kubernetes: answers the cluster domain and the reverse zones from
//     Services, EndpointSlices and Pods it watches.
//   - forward: sends every other name to the node's resolvers.
//   - cache: keeps answers for their TTL, so the API server's objects and the
//     upstream resolvers are not asked for each query.
//   - errors and log: errors and (when asked) queries go to the container's
//     log.
//   - health (/health on 8080) and ready (/ready on 8181): the liveness and
//     readiness probes of the Deployment.
//   - prometheus: metrics on 9153, the port the kube-dns Service names; the
//     server core links the Prometheus client already, so it costs nothing.
//   - loop: stops a forwarding loop (a node whose resolv.conf points back at
//     the cluster DNS) instead of serving it.
//   - reload: picks up a changed Corefile from the ConfigMap without a
//     restart.
//   - loadbalance: shuffles A and AAAA records, as the stock Corefile asks.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// linked are the directives of the plugins imported above.
var linked = map[string]bool{
	"cache": true, "errors": true, "forward": true, "health": true,
	"kubernetes": true, "loadbalance": true, "log": true, "loop": true,
	"prometheus": true, "ready": true, "reload": true,
}

// init keeps, in CoreDNS's own order (the order in which plugins see a
// query), only the directives linked here, so that a Corefile naming any
// other plugin is refused as an unknown directive.
func init() {
	var keep []string
	for _, d := range dnsserver.Directives {
		if linked[d] {
			keep = append(keep, d)
		}
	}
	dnsserver.Directives = keep
}

func main() {
	coremain.Run()
}
