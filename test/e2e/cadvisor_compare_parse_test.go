package e2e

import (
	"strings"
	"testing"
)

func TestCadvisorFamilyComparison(t *testing.T) {
	nodelet, err := parseScrape(`# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="main",cpu="total",id="/a",image="b",name="c",namespace="d",pod="e"} 1.5
# TYPE container_memory_rss gauge
container_memory_rss{container="main",id="/a",image="b",name="c",namespace="d",pod="e"} 10
# TYPE container_threads counter
container_threads{container="main",id="/a",image="b",name="c",namespace="d",pod="e"} 1
# TYPE container_memory_cache gauge
container_memory_cache{container="main",image="b",name="c",namespace="d",pod="e"} 1
# TYPE machine_cpu_cores gauge
machine_cpu_cores{boot_id="x",machine_id="y",system_uuid="z"} 2
`)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := parseScrape(`# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="",cpu="total",id="/",image="",name="",namespace="",pod=""} 100 1700000000000
# TYPE container_memory_rss gauge
container_memory_rss{container="",id="/",image="",name="",namespace="",pod=""} 10 1700000000000
# TYPE container_threads gauge
container_threads{container="",id="/",image="",name="",namespace="",pod=""} 10
# TYPE container_memory_cache gauge
container_memory_cache{container="",id="/",image="",name="",namespace="",pod=""} 10
# TYPE container_fs_reads_total counter
container_fs_reads_total{container="",device="/dev/vda",id="/",image="",name="",namespace="",pod=""} 7
# TYPE container_scrape_error gauge
container_scrape_error 0
# HELP container_empty Families without series are not served.
# TYPE container_empty gauge
`)
	if err != nil {
		t.Fatal(err)
	}
	rows := compareFamilies(familyShapes(nodelet), familyShapes(kubelet))
	want := map[string]string{
		"container_cpu_usage_seconds_total": matchYes,
		"container_memory_rss":              matchYes,
		"container_threads":                 matchType,
		"container_memory_cache":            matchLabels,
		"machine_cpu_cores":                 matchNodeletOnly,
		"container_fs_reads_total":          matchKubeletOnly,
		"container_scrape_error":            matchKubeletOnly,
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, r := range rows {
		if want[r.family] != r.match {
			t.Errorf("%s: got %q, want %q", r.family, r.match, want[r.family])
		}
		// nodelet's families first, then the kubelet's own, each sorted.
		if i > 0 && (rows[i-1].nodelet == nil) == (r.nodelet == nil) && rows[i-1].family > r.family {
			t.Errorf("rows not sorted: %s before %s", rows[i-1].family, r.family)
		}
		if i > 0 && rows[i-1].nodelet == nil && r.nodelet != nil {
			t.Errorf("%s of nodelet's after one of the kubelet's only", r.family)
		}
	}
	table := familyTable(rows)
	for _, line := range []string{
		"nodelet serves 2 families the kubelet serves alike; the kubelet serves 2 more.",
		"| `container_cpu_usage_seconds_total` | counter | container, cpu, id, image, name, namespace, pod | container, cpu, id, image, name, namespace, pod | yes |",
		"| `container_threads` | counter / gauge |",
		"| `container_fs_reads_total` | counter | — | container, device, id, image, name, namespace, pod | kubelet only |",
		"| `container_scrape_error` | gauge | — |  | kubelet only |",
	} {
		if !strings.Contains(table, line) {
			t.Errorf("table lacks %q:\n%s", line, table)
		}
	}
}

func TestKeepPodSeries(t *testing.T) {
	in := `# HELP a x
# TYPE a gauge
a{namespace="n",pod="p"} 1
a{namespace="n",pod="q"} 2
a{namespace="m",pod="p"} 3
machine_memory_bytes{boot_id="b"} 4
`
	want := `# HELP a x
# TYPE a gauge
a{namespace="n",pod="p"} 1
machine_memory_bytes{boot_id="b"} 4
`
	if got := keepPodSeries(in, "n", "p"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
