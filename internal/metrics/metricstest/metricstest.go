// Package metricstest holds helpers for tests of Prometheus collectors.
package metricstest

import (
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descName   = regexp.MustCompile(`fqName: "([^"]*)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// Described returns the name and variable labels of every family c
// describes. It panics on a Desc it cannot read, which only a change of
// client_golang's Desc.String would make.
func Described(c prometheus.Collector) map[string][]string {
	ch := make(chan *prometheus.Desc, 16)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		name, labels := descName.FindStringSubmatch(s), descLabels.FindStringSubmatch(s)
		if name == nil || labels == nil {
			panic("unexpected Desc format: " + s)
		}
		var l []string
		if labels[1] != "" {
			l = strings.Split(labels[1], ",")
		}
		out[name[1]] = l
	}
	return out
}
