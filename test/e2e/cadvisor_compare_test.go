package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// cadvisorNodeletNode and cadvisorKubeletNode are the nodes of the
	// comparison of /metrics/cadvisor.
	cadvisorNodeletNode = "e2e-cadvisor-nodelet"
	cadvisorKubeletNode = "e2e-cadvisor-kubelet"
	// cadvisorPodName is the pod each of them runs.
	cadvisorPodName = "burn"
	// cadvisorScrapeInterval is the time between two scrapes of each: the
	// interval kube-prometheus' dashboards assume at most (30 s there).
	cadvisorScrapeInterval = 15 * time.Second
	// cadvisorRecordScrapes is the number of scrapes made when recording
	// (NODELET_CADVISOR_RECORD): 5 minutes and one interval, so that a
	// [5m] range of the last one is full of samples, as Prometheus has it
	// (with two samples only, rate()'s extrapolation reads half of the
	// rate over a 5 minute range).
	cadvisorRecordScrapes = 22
	// cadvisorRecordEnv names a directory where the spec writes what it
	// scraped and the comparison table (test/dashboards/testdata is what
	// the PromQL check there reads).
	cadvisorRecordEnv = "NODELET_CADVISOR_RECORD"
	// cadvisorKubeletStartTimeout covers the kubelet's /healthz.
	cadvisorKubeletStartTimeout = 90 * time.Second
)

// The same pod under nodelet and under a real kubelet on the same API
// server, each agent with its own containerd, scraped through the API
// server's nodes/proxy: every family nodelet serves must be the kubelet's
// with the same type and label names; what the kubelet serves beyond them
// is listed. The kubelet runs as the harness runs it on this machine
// kind (no QoS cgroups), with the directory of its containerd's socket
// mounted where its cAdvisor looks for containerd.
var _ = Describe("/metrics/cadvisor compared with a real kubelet's", Ordered, Label(heavyLabel), func() {
	var (
		admin   client.Client
		kubelet *utils.Kubelet
		ns      string
	)

	BeforeAll(func() {
		if !strings.Contains(GinkgoLabelFilter(), heavyLabel) {
			Skip("a heavy spec: run it with -ginkgo.label-filter=" + heavyLabel)
		}
	})
	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: cadvisorNodeletNode, API: apiServer, Containerd: ctrd}
	})

	BeforeAll(func(ctx SpecContext) {
		admin = env.Admin
		By("starting a real kubelet with a containerd of its own, its cAdvisor seeing that containerd")
		kubeletCtrd := utils.MustStartContainerd(ctx, utils.ContainerdOptions{})
		nodeIP, err := kubeletCtrd.HostIP()
		Expect(err).NotTo(HaveOccurred())
		kubelet, err = utils.StartKubelet(ctx, utils.KubeletOptions{
			NodeName: cadvisorKubeletNode, API: apiServer, Containerd: kubeletCtrd, CadvisorRuntime: true,
			// Reached by the API server on the Node's address with its
			// kubelet client certificate, as a cluster's kubelet is.
			Config: map[string]any{
				"address": nodeIP.String(),
				"authentication": map[string]any{
					"x509":      map[string]any{"clientCAFile": apiServer.KubeletClientCA.CertFile},
					"webhook":   map[string]any{"enabled": false},
					"anonymous": map[string]any{"enabled": false},
				},
				"authorization": map[string]any{"mode": "AlwaysAllow"},
			},
			Args: []string{"--node-ip=" + nodeIP.String()},
		})
		if kubelet != nil {
			DeferCleanup(kubelet.Stop)
		}
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(deleteNode, admin, cadvisorKubeletNode)
		Expect(kubelet.WaitHealthy(ctx, cadvisorKubeletStartTimeout)).To(Succeed())
		waitNodeReady(ctx, admin, cadvisorKubeletNode, "the kubelet", kubelet.LogTail)
		ns = utils.NewNamespace(ctx, admin)
	}, NodeTimeout(kubeletSetupTimeout))

	JustAfterEach(func() {
		if CurrentSpecReport().Failed() && kubelet != nil {
			GinkgoWriter.Printf("kubelet log (%s):\n%s\n", kubelet.LogPath, kubelet.LogTail(80))
		}
	})

	It("serves every family nodelet serves with the kubelet's type and label names, for the same pod", func(ctx SpecContext) {
		record := os.Getenv(cadvisorRecordEnv)
		scrapes := 2
		if record != "" {
			scrapes = cadvisorRecordScrapes
		}
		agents := []string{cadvisorNodeletNode, cadvisorKubeletNode}
		for _, node := range agents {
			pod := cadvisorBurnPod(ns, node)
			Expect(admin.Create(ctx, pod)).To(Succeed())
			DeferCleanup(deletePodAndWait, admin, pod)
		}
		for _, node := range agents {
			utils.WaitForPod(ctx, admin, ns, cadvisorPodName+"-"+node, podStartTimeout, func(g Gomega, p *corev1.Pod) {
				g.Expect(utils.PodReady(p)).To(BeTrue())
			})
		}
		By("letting the pods run into their CPU quota, then scraping both agents every 15 s")
		select {
		case <-ctx.Done():
			Fail("interrupted")
		case <-time.After(cadvisorScrapeInterval):
		}
		got := map[string][]cadvisorScrape{}
		next := time.Now()
		for i := range scrapes {
			if i > 0 {
				next = next.Add(cadvisorScrapeInterval)
				select {
				case <-ctx.Done():
					Fail("interrupted")
				case <-time.After(time.Until(next)):
				}
			}
			for _, node := range agents {
				s := cadvisorScrape{node: node, at: time.Now()}
				Eventually(func(g Gomega) {
					s.text = kubectlOutput(ctx, g, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/metrics/cadvisor")
					var err error
					s.families, err = parseScrape(s.text)
					g.Expect(err).NotTo(HaveOccurred())
				}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(time.Second).Should(Succeed())
				got[node] = append(got[node], s)
			}
		}

		nodeletLast, kubeletLast := got[cadvisorNodeletNode][scrapes-1], got[cadvisorKubeletNode][scrapes-1]
		rows := compareFamilies(familyShapes(nodeletLast.families), familyShapes(kubeletLast.families))
		table := familyTable(rows)
		values := podValuesTable(ns, got)
		AddReportEntry("/metrics/cadvisor families, nodelet and kubelet", table)
		AddReportEntry("the same pod under each agent", values)
		GinkgoWriter.Printf("%s\n%s\n", table, values)
		if record != "" {
			writeCadvisorRecord(record, ns, got, table, values)
		}

		By("finding the pod's container in both, labelled as cAdvisor labels it")
		for _, node := range agents {
			last := got[node][scrapes-1]
			series := podSeries(last.families["container_cpu_usage_seconds_total"], ns, cadvisorPodName+"-"+node, "main")
			Expect(series).NotTo(BeEmpty(), "%s: the pod's container in container_cpu_usage_seconds_total", node)
			for _, l := range []string{"image", "name", "id"} {
				Expect(labelValue(series[0], l)).NotTo(BeEmpty(), "%s: label %s", node, l)
			}
			GinkgoWriter.Printf("%s: the container's series are labelled %v\n", node, series[0].GetLabel())
		}
		By("serving each of nodelet's families as the kubelet does")
		var mismatches []string
		for _, r := range rows {
			if r.nodelet != nil && r.match != matchYes {
				mismatches = append(mismatches, r.family+": "+r.match)
			}
		}
		Expect(mismatches).To(BeEmpty(), table)
		By("reading the same limits from both")
		for _, family := range []string{"container_spec_cpu_quota", "container_spec_cpu_period", "container_spec_cpu_shares", "container_spec_memory_limit_bytes"} {
			var vals []float64
			for _, node := range agents {
				series := podSeries(got[node][scrapes-1].families[family], ns, cadvisorPodName+"-"+node, "main")
				Expect(series).To(HaveLen(1), "%s of %s", family, node)
				vals = append(vals, sampleValue(series[0]))
			}
			Expect(vals[0]).To(Equal(vals[1]), family)
		}
	}, SpecTimeout(time.Duration(cadvisorRecordScrapes+4)*cadvisorScrapeInterval+2*podStartTimeout))
})

// cadvisorBurnPod is the pod of the comparison, bound to node: it keeps
// 8 MiB in a shell variable (RSS) and 8 MiB in a file of its writable
// layer (page cache), and burns CPU into its 200m limit (CFS throttling).
func cadvisorBurnPod(ns, node string) *corev1.Pod {
	pod := utils.BusyboxPod(ns, cadvisorPodName+"-"+node, node, "sh", "-c",
		"dd if=/dev/zero of=/tmp/cache bs=1M count=8 2>/dev/null; x=$(yes 0123456789abcdef | head -c 8388608); while :; do :; done")
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	return pod
}

// cadvisorScrape is one scrape of an agent's /metrics/cadvisor.
type cadvisorScrape struct {
	node     string
	at       time.Time
	text     string
	families map[string]*dto.MetricFamily
}

// parseScrape parses the text format.
func parseScrape(text string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(text))
}

// familyShape is a family's type and the names of the labels its series
// carry.
type familyShape struct {
	typ    string
	labels []string
}

// familyShapes returns the shape of each family that has series.
func familyShapes(families map[string]*dto.MetricFamily) map[string]familyShape {
	out := map[string]familyShape{}
	for name, mf := range families {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				seen[l.GetName()] = true
			}
		}
		labels := make([]string, 0, len(seen))
		for l := range seen {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		out[name] = familyShape{typ: strings.ToLower(mf.GetType().String()), labels: labels}
	}
	return out
}

// What a row of the comparison says.
const (
	matchYes         = "yes"
	matchKubeletOnly = "kubelet only"
	matchNodeletOnly = "no: not the kubelet's"
	matchType        = "no: type"
	matchLabels      = "no: label names"
)

// familyRow is one family of the comparison.
type familyRow struct {
	family           string
	nodelet, kubelet *familyShape
	match            string
}

// compareFamilies lines the families up by name: nodelet's first, then
// those only the kubelet serves, each part sorted.
func compareFamilies(nodelet, kubelet map[string]familyShape) []familyRow {
	var own, theirs []familyRow
	for name, n := range nodelet {
		r := familyRow{family: name, nodelet: &n, match: matchNodeletOnly}
		if k, ok := kubelet[name]; ok {
			r.kubelet = &k
			switch {
			case k.typ != n.typ:
				r.match = matchType
			case !slices.Equal(k.labels, n.labels):
				r.match = matchLabels
			default:
				r.match = matchYes
			}
		}
		own = append(own, r)
	}
	for name, k := range kubelet {
		if _, ok := nodelet[name]; !ok {
			theirs = append(theirs, familyRow{family: name, kubelet: &k, match: matchKubeletOnly})
		}
	}
	byName := func(a, b familyRow) int { return strings.Compare(a.family, b.family) }
	slices.SortFunc(own, byName)
	slices.SortFunc(theirs, byName)
	return append(own, theirs...)
}

// familyTable renders the comparison as a markdown table.
func familyTable(rows []familyRow) string {
	var b strings.Builder
	same, only := 0, 0
	for _, r := range rows {
		switch {
		case r.match == matchYes:
			same++
		case r.nodelet == nil:
			only++
		}
	}
	fmt.Fprintf(&b, "nodelet serves %d families the kubelet serves alike; the kubelet serves %d more.\n\n", same, only)
	b.WriteString("| family | type | nodelet labels | kubelet labels | match |\n|---|---|---|---|---|\n")
	cell := func(s *familyShape) string {
		if s == nil {
			return "—"
		}
		return strings.Join(s.labels, ", ")
	}
	for _, r := range rows {
		typ := ""
		switch {
		case r.nodelet != nil && r.kubelet != nil && r.nodelet.typ != r.kubelet.typ:
			typ = r.nodelet.typ + " / " + r.kubelet.typ
		case r.nodelet != nil:
			typ = r.nodelet.typ
		default:
			typ = r.kubelet.typ
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.family, typ, cell(r.nodelet), cell(r.kubelet), r.match)
	}
	return b.String()
}

// podSeries returns the series of mf labelled with the pod and container.
func podSeries(mf *dto.MetricFamily, ns, pod, container string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range mf.GetMetric() {
		if labelValue(m, "namespace") == ns && labelValue(m, "pod") == pod && labelValue(m, "container") == container {
			out = append(out, m)
		}
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sampleValue is a counter's, gauge's or untyped series' value.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// podValuesTable sets the pod's measures under each agent side by side:
// its container's CPU rate and throttled share between the last two
// scrapes (the rate over the samples' own timestamps where they have one:
// cAdvisor's are those of its last housekeeping, not of the scrape), and
// its memory at the last.
func podValuesTable(ns string, got map[string][]cadvisorScrape) string {
	var b strings.Builder
	b.WriteString("| agent | CPU cores (rate) | throttled periods | working set MiB | RSS MiB | cache MiB |\n|---|---|---|---|---|---|\n")
	for _, node := range []string{cadvisorNodeletNode, cadvisorKubeletNode} {
		s := got[node]
		if len(s) < 2 {
			continue
		}
		prev, last := s[len(s)-2], s[len(s)-1]
		pod := cadvisorPodName + "-" + node
		one := func(sc cadvisorScrape, family string) (float64, time.Time, bool) {
			series := podSeries(sc.families[family], ns, pod, "main")
			if len(series) == 0 {
				return 0, time.Time{}, false
			}
			at := sc.at
			if ms := series[0].TimestampMs; ms != nil {
				at = time.UnixMilli(*ms)
			}
			return sampleValue(series[0]), at, true
		}
		delta := func(family string) (float64, time.Duration, bool) {
			a, t0, ok1 := one(prev, family)
			z, t1, ok2 := one(last, family)
			return z - a, t1.Sub(t0), ok1 && ok2
		}
		cell := func(v float64, ok bool, format string) string {
			if !ok {
				return "—"
			}
			return fmt.Sprintf(format, v)
		}
		cpu, span, okCPU := delta("container_cpu_usage_seconds_total")
		okCPU = okCPU && span > 0
		throttled, _, okT := delta("container_cpu_cfs_throttled_periods_total")
		periods, _, okP := delta("container_cpu_cfs_periods_total")
		ratio, okR := 0.0, okT && okP && periods > 0
		if okR {
			ratio = throttled / periods
		}
		ws, _, okWS := one(last, "container_memory_working_set_bytes")
		rss, _, okRSS := one(last, "container_memory_rss")
		cache, _, okCache := one(last, "container_memory_cache")
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", node,
			cell(cpu/span.Seconds(), okCPU, "%.3f"), cell(ratio, okR, "%.2f"),
			cell(ws/(1<<20), okWS, "%.1f"), cell(rss/(1<<20), okRSS, "%.1f"), cell(cache/(1<<20), okCache, "%.1f"))
	}
	return b.String()
}

// cadvisorPodRecord describes the recorded pod for the PromQL check.
type cadvisorPodRecord struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Node      string `json:"node"`
	Container string `json:"container"`
}

// writeCadvisorRecord writes, under dir, nodelet's scrapes as they came
// (nodelet/NN.prom, each headed by a "# scraped <RFC 3339>" comment), the
// kubelet's reduced to the pod's series and the machine's
// (kubelet/NN.prom), the pods (nodelet.json, kubelet.json), and the
// tables.
func writeCadvisorRecord(dir, ns string, got map[string][]cadvisorScrape, table, values string) {
	GinkgoHelper()
	for agent, node := range map[string]string{"nodelet": cadvisorNodeletNode, "kubelet": cadvisorKubeletNode} {
		sub := filepath.Join(dir, agent)
		Expect(os.RemoveAll(sub)).To(Succeed())
		Expect(os.MkdirAll(sub, 0o755)).To(Succeed())
		pod := cadvisorPodName + "-" + node
		for i, s := range got[node] {
			text := s.text
			if agent == "kubelet" {
				text = keepPodSeries(text, ns, pod)
			}
			head := fmt.Sprintf("# scraped %s from /api/v1/nodes/%s/proxy/metrics/cadvisor\n", s.at.UTC().Format(time.RFC3339Nano), node)
			Expect(os.WriteFile(filepath.Join(sub, fmt.Sprintf("%02d.prom", i)), []byte(head+text), 0o644)).To(Succeed())
		}
		data, err := json.MarshalIndent(cadvisorPodRecord{Namespace: ns, Pod: pod, Node: node, Container: "main"}, "", "  ")
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, agent+".json"), append(data, '\n'), 0o644)).To(Succeed())
	}
	Expect(os.WriteFile(filepath.Join(dir, "cadvisor-families.md"), []byte(table+"\n"+values), 0o644)).To(Succeed())
}

// keepPodSeries keeps the comment lines of a scrape, and of its series
// those of the pod and the machine's.
func keepPodSeries(text, ns, pod string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "machine_") ||
			(strings.Contains(line, `namespace="`+ns+`"`) && strings.Contains(line, `pod="`+pod+`"`)) {
			b.WriteString(line)
		}
	}
	return b.String()
}
