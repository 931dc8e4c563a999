package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/nodelet/nodelet/test/utils"
)

// kubeletStartTimeout bounds the wait for the kubelet's /healthz.
const kubeletStartTimeout = 90 * time.Second

// StartKubelet starts the real kubelet of opts (Binary is the one
// hack/conformance.sh built) as the conformance node: its API on the
// Node's InternalIP at KubeletPort, trusting the API server's kubelet
// client certificates and authorizing every request they make, as a
// cluster's kubelet does for the suite's proxied requests. It returns once
// /healthz answers, and from then on the kubelet is started again
// whenever it exits: in this configuration (no QoS cgroups) it crashes on
// some in-place resizes.
func StartKubelet(ctx context.Context, opts utils.KubeletOptions) (*utils.Kubelet, error) {
	nodeIP, err := opts.Containerd.HostIP()
	if err != nil {
		return nil, err
	}
	opts.Config = map[string]any{
		"address": nodeIP.String(),
		"port":    KubeletPort,
		"authentication": map[string]any{
			"x509":      map[string]any{"clientCAFile": opts.API.KubeletClientCA.CertFile},
			"webhook":   map[string]any{"enabled": false},
			"anonymous": map[string]any{"enabled": false},
		},
		"authorization": map[string]any{"mode": "AlwaysAllow"},
		"resolvConf":    "/etc/resolv.conf",
		// Evict only when the machine is really short.
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
	}
	opts.Args = append(opts.Args, "--node-ip="+nodeIP.String())
	k, err := utils.StartKubelet(ctx, opts)
	if err != nil {
		return k, err
	}
	if err := k.WaitHealthy(ctx, kubeletStartTimeout); err != nil {
		return k, errors.Join(err, k.Stop())
	}
	k.Supervise()
	return k, nil
}
