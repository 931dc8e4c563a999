package bench

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMemSplit(t *testing.T) {
	status := "Name:\tcat\nVmPeak:\t    3060 kB\nVmHWM:\t    1644 kB\nVmRSS:\t    1600 kB\n" +
		"RssAnon:\t     116 kB\nRssFile:\t    1484 kB\nRssShmem:\t       0 kB\nVmData:\t     360 kB\n"
	want := memSplit{rss: 1600 * 1024, peak: 1644 * 1024, anon: 116 * 1024, file: 1484 * 1024}
	if got := parseMemSplit(status); got != want {
		t.Errorf("parseMemSplit = %+v, want %+v", got, want)
	}
	if got := parseMemSplit("Name:\tzombie\nState:\tZ (zombie)\n"); got != (memSplit{}) {
		t.Errorf("parseMemSplit of a process without memory = %+v, want zeros", got)
	}
}

func TestParseMetrics(t *testing.T) {
	page := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST",version="v1"} 110
apiserver_request_total{code="200",component="apiserver",resource="pods",subresource="status",verb="PATCH",version="v1"} 250
apiserver_request_total{code="200",component="apiserver",resource="nodes",verb="PATCH",version="v1"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 7
controller_runtime_reconcile_total{controller="pod",result="success"} 12
go_memstats_heap_inuse_bytes 1.2e+07
broken_line{a="b"} not-a-number
`
	got, err := parseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"apiserver_request_total":                363,
		"apiserver_request_total/POST":           110,
		"apiserver_request_total/PATCH":          253,
		"rest_client_requests_total":             7,
		"rest_client_requests_total/GET":         7,
		"controller_runtime_reconcile_total":     12,
		"controller_runtime_reconcile_total/pod": 12,
		"go_memstats_heap_inuse_bytes":           1.2e7,
	}
	if !maps.Equal(got, want) {
		t.Errorf("parseMetrics = %v, want %v", got, want)
	}
}

func TestAgentRequests(t *testing.T) {
	before := map[string]float64{"": 1000, "/GET": 600, "/POST": 300, "/PATCH": 100}
	after := map[string]float64{"": 1500, "/GET": 611, "/POST": 520, "/PATCH": 369}
	own := map[string]float64{"": 110, "/POST": 110}
	// 500 more requests: 110 creates and one scrape are the benchmark's.
	want := map[string]float64{"": 389, "/GET": 10, "/POST": 110, "/PATCH": 269}
	if got := agentRequests(before, after, own); !maps.Equal(got, want) {
		t.Errorf("agentRequests = %v, want %v", got, want)
	}
}

func TestParsePoints(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", []int{50, 110, 250}, false},
		{"110, 50", []int{50, 110}, false},
		{"110,110", []int{110}, false},
		{"none", nil, false},
		{"100", nil, true},
		{"fifty", nil, true},
	} {
		got, err := parsePoints(tc.in, []int{50, 110, 250})
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parsePoints(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestSideBySidePoints(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", curvePoints, false},
		{" 500 ", append(slices.Clone(curvePoints), 500), false},
		{fmt.Sprint(scaleMaxPods), nil, true},
		{fmt.Sprint(maxDensePods + 1), nil, true},
		{"many", nil, true},
	} {
		got, err := sideBySidePoints(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("sideBySidePoints(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	// The default curve is not changed by a dense one.
	if _, err := sideBySidePoints("500"); err != nil || len(curvePoints) != 4 {
		t.Errorf("curvePoints = %v after a dense point", curvePoints)
	}
}

func TestFigureMet(t *testing.T) {
	base := figure{format: fmtSeconds}
	with := func(f func(*figure)) figure {
		g := base
		f(&g)
		return g
	}
	for _, tc := range []struct {
		name       string
		fig        figure
		want       string
		wantTarget string
	}{
		{"no bound", with(func(f *figure) { f.floor, f.kubelet, f.nodelet = 1, 2, 3 }), "", ""},
		{"no bound, a note", with(func(f *figure) { f.nodelet, f.note = 3, "printed" }), "", "printed"},
		{"both ratios met",
			with(func(f *figure) { f.floor, f.kubelet, f.nodelet, f.maxVsFloor, f.maxVsKubelet = 10, 20, 10.4, 1.05, 0.6 }),
			"ok", "≤ 1.05× floor, ≤ 0.60× kubelet"},
		{"floor ratio missed",
			with(func(f *figure) { f.floor, f.kubelet, f.nodelet, f.maxVsFloor, f.maxVsKubelet = 10, 20, 11, 1.05, 0.6 }),
			"MISSED", "≤ 1.05× floor, ≤ 0.60× kubelet"},
		{"kubelet ratio missed",
			with(func(f *figure) { f.floor, f.kubelet, f.nodelet, f.maxVsFloor, f.maxVsKubelet = 10, 15, 10, 1.05, 0.6 }),
			"MISSED", "≤ 1.05× floor, ≤ 0.60× kubelet"},
		{"kubelet not measured",
			with(func(f *figure) { f.floor, f.kubelet, f.nodelet, f.maxVsFloor, f.maxVsKubelet = 10, nan, 10, 1.05, 0.6 }),
			"n/a", "≤ 1.05× floor, ≤ 0.60× kubelet"},
		{"missed wins over not measured",
			with(func(f *figure) { f.floor, f.kubelet, f.nodelet, f.maxVsFloor, f.maxVsKubelet = 10, nan, 12, 1.05, 0.6 }),
			"MISSED", "≤ 1.05× floor, ≤ 0.60× kubelet"},
		{"absolute bound met", with(func(f *figure) { f.floor, f.nodelet, f.maxValue = nan, 0.9, 1 }), "ok", "≤ 1.00s"},
		{"absolute bound missed", with(func(f *figure) { f.floor, f.nodelet, f.maxValue = nan, 1.1, 1 }), "MISSED", "≤ 1.00s"},
		{"within the floor plus", with(func(f *figure) { f.floor, f.nodelet, f.maxOverFloor = 0.3, 0.32, 0.03 }), "ok", "≤ floor + 30ms"},
		{"beyond the floor plus", with(func(f *figure) { f.floor, f.nodelet, f.maxOverFloor = 0.3, 0.34, 0.03 }), "MISSED", "≤ floor + 30ms"},
		{"none, as must be", with(func(f *figure) { f.nodelet, f.mustBeZero = 0, true }), "ok", "0"},
		{"some, where none must be", with(func(f *figure) { f.nodelet, f.mustBeZero = 1, true }), "MISSED", "0"},
		{"none must be, not measured", with(func(f *figure) { f.nodelet, f.mustBeZero = nan, true }), "n/a", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fig.met(); got != tc.want {
				t.Errorf("met = %q, want %q", got, tc.want)
			}
			if got := tc.fig.target(); got != tc.wantTarget {
				t.Errorf("target = %q, want %q", got, tc.wantTarget)
			}
		})
	}
}

func TestQuotient(t *testing.T) {
	if got := quotient(3, 2); got != 1.5 {
		t.Errorf("quotient(3, 2) = %v", got)
	}
	for _, tc := range [][2]float64{{1, 0}, {nan, 1}, {1, nan}, {1, -1}, {math.Inf(1), 1}} {
		if got := quotient(tc[0], tc[1]); known(got) {
			t.Errorf("quotient(%v, %v) = %v, want NaN", tc[0], tc[1], got)
		}
	}
}

func TestRemoveLinksInto(t *testing.T) {
	dir, target, other := t.TempDir(), t.TempDir(), t.TempDir()
	for name, to := range map[string]string{
		"mine.log":   filepath.Join(target, "ns_pod_uid", "main", "0.log"),
		"theirs.log": filepath.Join(other, "ns_pod_uid", "main", "0.log"),
		"prefix.log": target + "-not-it/0.log",
	} {
		if err := os.Symlink(to, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeLinksInto(dir, target); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"file.log", "prefix.log", "theirs.log"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if err := removeLinksInto(filepath.Join(dir, "missing"), target); err != nil {
		t.Errorf("a missing directory: %v", err)
	}
}

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		wantErr    bool
	}{
		{
			name: "own and children's ticks",
			stat: "4242 (kubelet) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 12 0 100 2000000 5000 18446744073709551615\n",
			want: 3100 * time.Millisecond,
		},
		{
			name: "a command name with a space and parentheses",
			stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7\n",
			want: 100 * time.Millisecond,
		},
		{name: "cut short", stat: "7 (x) R 1 7 7 0", wantErr: true},
		{name: "no command", stat: "garbage", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.stat)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseStatCPU = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseMachineBusy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{
			// user nice system idle iowait irq softirq steal guest guest_nice
			name: "busy is all but idle and iowait",
			stat: "cpu  100 2 30 9000 500 4 5 6 50 0\ncpu0 50 1 15 4500 250 2 2 3 25 0\n",
			want: 1470 * time.Millisecond,
		},
		{name: "no cpu line first", stat: "cpu0 1 2 3 4 5 6 7 8\n", wantErr: true},
		{name: "cut short", stat: "cpu  1 2 3 4\n", wantErr: true},
		{name: "not a number", stat: "cpu  1 x 3 4 5 6 7 8\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMachineBusy(tc.stat)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseMachineBusy = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseStatParent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stat     string
		wantComm string
		wantPPID int
		wantOK   bool
	}{
		{name: "etcd", stat: "812 (etcd) S 800 812 700 0 -1 0 0 0 0 0 90 10 0 0 20 0 9 0 5 6 7\n", wantComm: "etcd", wantPPID: 800, wantOK: true},
		{name: "a command name with a space and parentheses", stat: "7 (a (b) c) R 1 7 7 0\n", wantComm: "a (b) c", wantPPID: 1, wantOK: true},
		{name: "no parent", stat: "7 (x) R", wantOK: false},
		{name: "no command", stat: "garbage", wantOK: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comm, ppid, ok := parseStatParent(tc.stat)
			if comm != tc.wantComm || ppid != tc.wantPPID || ok != tc.wantOK {
				t.Errorf("parseStatParent = %q, %d, %v; want %q, %d, %v", comm, ppid, ok, tc.wantComm, tc.wantPPID, tc.wantOK)
			}
		})
	}
}
