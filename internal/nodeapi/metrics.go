package nodeapi

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// proberGatherer serves the prober's families of a registry on
// /metrics/probes.
type proberGatherer struct{ g prometheus.Gatherer }

func (p proberGatherer) Gather() ([]*dto.MetricFamily, error) {
	all, err := p.g.Gather()
	var out []*dto.MetricFamily
	for _, f := range all {
		if strings.Contains(f.GetName(), "prober_probe") {
			out = append(out, f)
		}
	}
	return out, err
}
