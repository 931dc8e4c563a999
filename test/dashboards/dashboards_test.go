package dashboards

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/teststorage"
)

// mixinConfig is kube-prometheus' configuration of the kubernetes-mixin
// (prometheus-operator/kube-prometheus, jsonnet/kube-prometheus/components/
// k8s-control-plane.libsonnet): the cAdvisor series are those its kubelet
// ServiceMonitor scrapes from /metrics/cadvisor under the job "kubelet"
// (manifests/kubernetesControlPlane-serviceMonitorKubelet.yaml), and one
// cluster, whose series carry no cluster label.
var mixinConfig = map[string]string{
	"clusterLabel":       "cluster",
	"namespaceLabel":     "namespace",
	"cadvisorSelector":   `job="kubelet", metrics_path="/metrics/cadvisor"`,
	"grafanaIntervalVar": "$__rate_interval",
}

// scrapeInterval is the recorded scrapes' interval; Grafana's
// $__rate_interval is four of them.
const scrapeInterval = 15 * time.Second

// recordingRules are the kubernetes-mixin's rules the pod dashboard's CPU
// and memory panels read, as written in kubernetes-monitoring/
// kubernetes-mixin rules/apps.libsonnet (groups k8s.rules.container_*; as
// of commit 03a94e914308).
var recordingRules = []struct{ record, expr string }{
	{"node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m", `
sum by (%(clusterLabel)s, namespace, pod, container) (
  rate(container_cpu_usage_seconds_total{%(cadvisorSelector)s, image!=""}[5m])
) * on (%(clusterLabel)s, namespace, pod) group_left(node) topk by (%(clusterLabel)s, namespace, pod) (
  1, max by(%(clusterLabel)s, namespace, pod, node) (kube_pod_info{node!=""})
)`},
	{"node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate", `
sum by (%(clusterLabel)s, namespace, pod, container) (
  irate(container_cpu_usage_seconds_total{%(cadvisorSelector)s, image!=""}[5m])
) * on (%(clusterLabel)s, namespace, pod) group_left(node) topk by (%(clusterLabel)s, namespace, pod) (
  1, max by(%(clusterLabel)s, namespace, pod, node) (kube_pod_info{node!=""})
)`},
	{"node_namespace_pod_container:container_memory_working_set_bytes", `
container_memory_working_set_bytes{%(cadvisorSelector)s, image!=""}
* on (%(clusterLabel)s, namespace, pod) group_left(node) topk by(%(clusterLabel)s, namespace, pod) (1,
  max by(%(clusterLabel)s, namespace, pod, node) (kube_pod_info{node!=""})
)`},
	{"node_namespace_pod_container:container_memory_rss", `
container_memory_rss{%(cadvisorSelector)s, image!=""}
* on (%(clusterLabel)s, namespace, pod) group_left(node) topk by(%(clusterLabel)s, namespace, pod) (1,
  max by(%(clusterLabel)s, namespace, pod, node) (kube_pod_info{node!=""})
)`},
	{"node_namespace_pod_container:container_memory_cache", `
container_memory_cache{%(cadvisorSelector)s, image!=""}
* on (%(clusterLabel)s, namespace, pod) group_left(node) topk by(%(clusterLabel)s, namespace, pod) (1,
  max by(%(clusterLabel)s, namespace, pod, node) (kube_pod_info{node!=""})
)`},
}

// panel is one query of the pod dashboard and the pod's value it shows,
// computed from the recorded samples.
type panel struct {
	name, query string
	want        func(t *testing.T, r recording) (float64, bool)
}

// panels are the CPU and memory queries of "Kubernetes / Compute
// Resources / Pod", as written in kubernetes-monitoring/kubernetes-mixin
// dashboards/resources/queries/pod.libsonnet (cpuUsageByContainer,
// cpuThrottling, memoryUsageWSS, memoryUsageRSS, memoryUsageCache,
// memoryUsageSwap; as of commit 16f3cbb405cb), and the CPU panel of its
// earlier versions (dashboards/resources/pod.libsonnet), which read the
// irate rule.
var panels = []panel{
	{"CPU Usage", `sum(max by (%(clusterLabel)s, %(namespaceLabel)s, pod, container)(node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m{namespace="$namespace", pod="$pod", %(clusterLabel)s="$cluster", container!=""})) by (container)`,
		func(t *testing.T, r recording) (float64, bool) {
			return r.rate(t, "container_cpu_usage_seconds_total", 5*time.Minute)
		}},
	{"CPU Usage (irate, earlier dashboards)", `sum(node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate{namespace="$namespace", pod="$pod", %(clusterLabel)s="$cluster"}) by (container)`,
		func(t *testing.T, r recording) (float64, bool) {
			return r.lastRate("container_cpu_usage_seconds_total")
		}},
	{"CPU Throttling", `sum(increase(container_cpu_cfs_throttled_periods_total{%(cadvisorSelector)s, namespace="$namespace", pod="$pod", container!="", %(clusterLabel)s="$cluster"}[%(grafanaIntervalVar)s])) by (container) /sum(increase(container_cpu_cfs_periods_total{%(cadvisorSelector)s, namespace="$namespace", pod="$pod", container!="", %(clusterLabel)s="$cluster"}[%(grafanaIntervalVar)s])) by (container)`,
		func(t *testing.T, r recording) (float64, bool) {
			throttled, ok1 := r.increase("container_cpu_cfs_throttled_periods_total", 4*scrapeInterval)
			periods, ok2 := r.increase("container_cpu_cfs_periods_total", 4*scrapeInterval)
			return throttled / periods, ok1 && ok2 && periods > 0
		}},
	{"Memory Usage (WSS)", `sum(max by (%(clusterLabel)s, %(namespaceLabel)s, pod, container)(container_memory_working_set_bytes{%(cadvisorSelector)s, %(clusterLabel)s="$cluster", namespace="$namespace", pod="$pod", container!="", image!=""})) by (container)`,
		func(t *testing.T, r recording) (float64, bool) { return r.last("container_memory_working_set_bytes") }},
	{"Memory Usage (RSS)", `sum(max by (%(clusterLabel)s, %(namespaceLabel)s, pod, container)(container_memory_rss{%(cadvisorSelector)s, %(clusterLabel)s="$cluster", namespace="$namespace", pod="$pod", container != "", container != "POD"})) by (container)`,
		func(t *testing.T, r recording) (float64, bool) { return r.last("container_memory_rss") }},
	{"Memory Usage (Cache)", `sum(max by (%(clusterLabel)s, %(namespaceLabel)s, pod, container)(container_memory_cache{%(cadvisorSelector)s, %(clusterLabel)s="$cluster", namespace="$namespace", pod="$pod", container != "", container != "POD"})) by (container)`,
		func(t *testing.T, r recording) (float64, bool) { return r.last("container_memory_cache") }},
	{"Memory Usage (Swap)", `sum(max by (%(clusterLabel)s, %(namespaceLabel)s, pod, container)(container_memory_swap{%(cadvisorSelector)s, %(clusterLabel)s="$cluster", namespace="$namespace", pod="$pod", container != "", container != "POD"})) by (container)`,
		func(t *testing.T, r recording) (float64, bool) { return r.last("container_memory_swap") }},
}

// TestPodDashboard evaluates the recording rules and the panels over the
// scrapes of nodelet, and of the kubelet that ran the same pod beside it,
// at the time of the last scrape.
func TestPodDashboard(t *testing.T) {
	for _, agent := range []string{"nodelet", "kubelet"} {
		t.Run(agent, func(t *testing.T) {
			r := loadRecording(t, filepath.Join("testdata", agent))
			st := teststorage.New(t)
			r.store(t, st)
			engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
			at := r.scrapes[len(r.scrapes)-1].at
			vars := map[string]string{
				"$namespace": r.pod.Namespace, "$pod": r.pod.Pod, "$cluster": "",
				"$__rate_interval": model.Duration(4 * scrapeInterval).String(),
			}
			app := st.Appender(t.Context())
			for _, rule := range recordingRules {
				for _, s := range evaluate(t, engine, st, expand(rule.expr, vars), at) {
					lbls := labels.NewBuilder(s.Metric).Set(model.MetricNameLabel, rule.record).Labels()
					if _, err := app.Append(0, lbls, at.UnixMilli(), s.F); err != nil {
						t.Fatalf("recording %s: %v", rule.record, err)
					}
				}
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
			for _, p := range panels {
				want, ok := p.want(t, r)
				got := map[string]float64{}
				for _, s := range evaluate(t, engine, st, expand(p.query, vars), at) {
					got[s.Metric.Get("container")] = s.F
				}
				// The kubelet's pod sandbox is a container of its cAdvisor
				// (container="", the pause image): the earlier panel,
				// which does not leave it out, shows it.
				if agent == "kubelet" {
					delete(got, "")
				}
				switch {
				case !ok:
					if len(got) != 0 {
						t.Errorf("%s: got %v from a pod without the measure", p.name, got)
					}
				case len(got) != 1:
					t.Errorf("%s: got %v, want the container %q alone", p.name, got, r.pod.Container)
				case !nearlyEqual(got[r.pod.Container], want):
					t.Errorf("%s: got %v, want %s=%g", p.name, got, r.pod.Container, want)
				default:
					t.Logf("%-38s %s=%g", p.name, r.pod.Container, want)
				}
			}
		})
	}
}

// nearlyEqual reports whether a and b are equal but for float rounding.
func nearlyEqual(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// expand puts kube-prometheus' mixin configuration and the dashboard's
// variables into a query.
func expand(q string, vars map[string]string) string {
	for k, v := range mixinConfig {
		q = strings.ReplaceAll(q, "%("+k+")s", v)
	}
	// The longest first: $__rate_interval is not $pod's.
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		q = strings.ReplaceAll(q, k, vars[k])
	}
	return q
}

func evaluate(t *testing.T, engine *promql.Engine, st *teststorage.TestStorage, query string, at time.Time) promql.Vector {
	t.Helper()
	q, err := engine.NewInstantQuery(t.Context(), st, nil, query, at)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer q.Close()
	res := q.Exec(t.Context())
	if res.Err != nil {
		t.Fatalf("%s: %v", query, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// podRecord is the recorded pod (<agent>.json, written by the e2e suite).
type podRecord struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Node      string `json:"node"`
	Container string `json:"container"`
}

// scrape is one recorded scrape and when it was made.
type scrape struct {
	at       time.Time
	families map[string]*dto.MetricFamily
}

// recording is an agent's recorded scrapes of the pod, oldest first.
type recording struct {
	pod     podRecord
	scrapes []scrape
}

// scrapedPrefix heads each recorded scrape: "# scraped <RFC 3339> from
// <path>", a comment to the text format.
const scrapedPrefix = "# scraped "

func loadRecording(t *testing.T, dir string) recording {
	t.Helper()
	var r recording
	data, err := os.ReadFile(dir + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r.pod); err != nil {
		t.Fatalf("%s.json: %v", dir, err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.prom"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(data), "\n")
		stamp, ok := strings.CutPrefix(head, scrapedPrefix)
		if !ok {
			t.Fatalf("%s: no %q line first", f, scrapedPrefix)
		}
		at, err := time.Parse(time.RFC3339Nano, strings.Fields(stamp)[0])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		families, err := p.TextToMetricFamilies(strings.NewReader(string(data)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// Prometheus keeps milliseconds.
		r.scrapes = append(r.scrapes, scrape{at: time.UnixMilli(at.UnixMilli()), families: families})
	}
	if len(r.scrapes) < 2 {
		t.Fatalf("%s: %d scrapes, want two or more", dir, len(r.scrapes))
	}
	return r
}

// store appends the scrapes to st as kube-prometheus' Prometheus would
// have: each sample at the time of its scrape (honorTimestamps: false on
// /metrics/cadvisor), the scraped labels over the target's
// (honorLabels: true), and kube-state-metrics' kube_pod_info of the pod.
func (r recording) store(t *testing.T, st *teststorage.TestStorage) {
	t.Helper()
	target := map[string]string{
		"job": "kubelet", "metrics_path": "/metrics/cadvisor", "service": "kubelet",
		"endpoint": "https-metrics", "instance": r.pod.Node + ":10250", "namespace": "kube-system",
	}
	app := st.Appender(context.Background())
	for _, s := range r.scrapes {
		ts := s.at.UnixMilli()
		for name, mf := range s.families {
			for _, m := range mf.GetMetric() {
				b := labels.NewBuilder(labels.FromMap(target)).Set(model.MetricNameLabel, name)
				for _, l := range m.GetLabel() {
					b.Set(l.GetName(), l.GetValue())
				}
				if _, err := app.Append(0, b.Labels(), ts, value(m)); err != nil {
					t.Fatalf("appending %s: %v", name, err)
				}
			}
		}
		info := labels.FromMap(map[string]string{
			model.MetricNameLabel: "kube_pod_info", "job": "kube-state-metrics",
			"namespace": r.pod.Namespace, "pod": r.pod.Pod, "node": r.pod.Node,
		})
		if _, err := app.Append(0, info, ts, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// point is one sample of the pod's container.
type point struct {
	at time.Time
	v  float64
}

// series returns the samples of the pod's container in family (its image
// set: not the pod's own cgroup), one per scrape that has it.
func (r recording) series(family string) []point {
	var out []point
	for _, s := range r.scrapes {
		for _, m := range s.families[family].GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["namespace"] == r.pod.Namespace && l["pod"] == r.pod.Pod && l["container"] == r.pod.Container && l["image"] != "" {
				out = append(out, point{s.at, value(m)})
			}
		}
	}
	return out
}

// window returns the samples of family in the range of length d that ends
// at the last scrape (its start left out, as Prometheus 3 does).
func (r recording) window(family string, d time.Duration) []point {
	end := r.scrapes[len(r.scrapes)-1].at
	var out []point
	for _, p := range r.series(family) {
		if p.at.After(end.Add(-d)) {
			out = append(out, p)
		}
	}
	return out
}

// increase is how much a counter grew over the samples of the range.
func (r recording) increase(family string, d time.Duration) (float64, bool) {
	pts := r.window(family, d)
	if len(pts) < 2 {
		return 0, false
	}
	return pts[len(pts)-1].v - pts[0].v, true
}

// rate is the counter's average growth per second over the samples of the
// range. It is what Prometheus' rate() returns only where the samples
// fill the range (the first one less than 1.1 intervals after its start):
// the recording must cover it.
func (r recording) rate(t *testing.T, family string, d time.Duration) (float64, bool) {
	t.Helper()
	pts := r.window(family, d)
	if len(pts) < 2 {
		return 0, false
	}
	first, last := pts[0], pts[len(pts)-1]
	span := last.at.Sub(first.at)
	avg := span / time.Duration(len(pts)-1)
	if gap := first.at.Sub(last.at.Add(-d)); gap > avg*11/10 {
		t.Fatalf("%s: the recorded samples start %s into the %s range: record more scrapes", family, gap, d)
	}
	return (last.v - first.v) / span.Seconds(), true
}

// lastRate is the counter's growth per second between its last two
// samples.
func (r recording) lastRate(family string) (float64, bool) {
	pts := r.series(family)
	if len(pts) < 2 {
		return 0, false
	}
	a, b := pts[len(pts)-2], pts[len(pts)-1]
	return (b.v - a.v) / b.at.Sub(a.at).Seconds(), true
}

// last is the gauge's value at the last scrape.
func (r recording) last(family string) (float64, bool) {
	pts := r.series(family)
	if len(pts) == 0 || !pts[len(pts)-1].at.Equal(r.scrapes[len(r.scrapes)-1].at) {
		return 0, false
	}
	return pts[len(pts)-1].v, true
}
