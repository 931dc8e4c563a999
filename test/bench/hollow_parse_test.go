package bench

import (
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseSample(t *testing.T) {
	for _, tc := range []struct {
		line   string
		name   string
		labels map[string]string
		value  float64
		ok     bool
	}{
		{"# HELP x y", "", nil, 0, false},
		{"", "", nil, 0, false},
		{"up 1", "up", map[string]string{}, 1, true},
		{`apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 42`,
			"apiserver_request_total", map[string]string{"code": "200", "resource": "pods", "subresource": "status", "verb": "PATCH"}, 42, true},
		{`m{a="x\"y",b="c,d}"} 1.5e+06`, "m", map[string]string{"a": `x"y`, "b": "c,d}"}, 1.5e6, true},
		{`m{a="unclosed} 1`, "", nil, 0, false},
		{`m{a="b"} notanumber`, "", nil, 0, false},
	} {
		name, labels, value, ok := parseSample(tc.line)
		if ok != tc.ok || name != tc.name || value != tc.value || (tc.ok && !maps.Equal(labels, tc.labels)) {
			t.Errorf("parseSample(%q) = %q %v %v %v, want %q %v %v %v", tc.line, name, labels, value, ok, tc.name, tc.labels, tc.value, tc.ok)
		}
	}
}

func TestRequestKey(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        reqKey
	}{
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=spec.nodeName%3Dn", reqKey{"LIST", "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&fieldSelector=x", reqKey{"WATCH", "pods"}},
		{"GET", "/api/v1/pods?watch=1", reqKey{"WATCH", "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods/p", reqKey{"GET", "pods"}},
		{"PATCH", "/api/v1/namespaces/ns/pods/p/status", reqKey{"PATCH", "pods/status"}},
		{"POST", "/api/v1/namespaces/ns/pods", reqKey{"POST", "pods"}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", reqKey{"DELETE", "pods"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", reqKey{"DELETECOLLECTION", "pods"}},
		{"GET", "/api/v1/namespaces/ns", reqKey{"GET", "namespaces"}},
		{"PUT", "/api/v1/namespaces/ns/finalize", reqKey{"PUT", "namespaces/finalize"}},
		{"GET", "/api/v1/nodes", reqKey{"LIST", "nodes"}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n", reqKey{"PUT", "leases"}},
		{"GET", "/metrics", reqKey{"GET", ""}},
		{"GET", "/apis", reqKey{"GET", ""}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestKey(tc.method, u); got != tc.want {
			t.Errorf("requestKey(%s %s) = %v, want %v", tc.method, tc.url, got, tc.want)
		}
	}
}

const metricsText = `# HELP apiserver_request_total x
apiserver_request_total{code="200",resource="leases",subresource="",verb="PUT"} %LEASE%
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} %POST%
apiserver_request_total{code="200",resource="",subresource="",verb="GET"} %GET%
apiserver_response_sizes_sum{resource="pods",subresource="",verb="POST"} %POSTB%
apiserver_response_sizes_sum{resource="pods",subresource="",verb="WATCH"} %WB%
apiserver_response_sizes_bucket{resource="pods",subresource="",verb="POST",le="1000"} 99
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} %WB%
apiserver_watch_events_total{group="",resource="pods",version="v1"} 3
apiserver_longrunning_requests{resource="pods",subresource="",verb="WATCH"} %W%
apiserver_longrunning_requests{resource="leases",subresource="",verb="WATCH"} 1
apiserver_longrunning_requests{resource="pods",subresource="log",verb="CONNECT"} 7
`

func snapshotOf(t *testing.T, at time.Time, vals map[string]string) apiSnapshot {
	t.Helper()
	text := metricsText
	for k, v := range vals {
		text = strings.ReplaceAll(text, "%"+k+"%", v)
	}
	s, err := parseAPISnapshot(strings.NewReader(text), at)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWindowMinusBaseAndOwn(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// The API server alone: 1 lease update and 2 watches over 10 s.
	base := between(
		snapshotOf(t, t0, map[string]string{"LEASE": "10", "POST": "0", "GET": "1", "POSTB": "0", "WB": "0", "W": "2"}),
		snapshotOf(t, t0.Add(10*time.Second), map[string]string{"LEASE": "11", "POST": "0", "GET": "2", "POSTB": "0", "WB": "0", "W": "2"}))
	// 20 s with nodes: 12 lease updates, 5 pods created by the benchmark,
	// 102 watches open.
	w := between(
		snapshotOf(t, t0.Add(time.Minute), map[string]string{"LEASE": "100", "POST": "10", "GET": "5", "POSTB": "1000", "WB": "50", "W": "2"}),
		snapshotOf(t, t0.Add(80*time.Second), map[string]string{"LEASE": "112", "POST": "15", "GET": "9", "POSTB": "1500", "WB": "350", "W": "102"}))
	if _, ok := w.requests[reqKey{"GET", ""}]; ok {
		t.Errorf("a non-resource request was counted: %v", w.requests)
	}
	got := w.minus(base, map[reqKey]tally{{"POST", "pods"}: {count: 5, bytes: 500}})
	want := map[reqKey]float64{{"PUT", "leases"}: 10}
	if !maps.Equal(got.requests, want) {
		t.Errorf("requests = %v, want %v", got.requests, want)
	}
	if len(got.bytes) != 0 {
		t.Errorf("bytes = %v, want none left (a watch's bytes are its events')", got.bytes)
	}
	if got.watches != 100 || got.watchBytes != 300 || got.dur != 20*time.Second {
		t.Errorf("watches %v, watch bytes %v, duration %v", got.watches, got.watchBytes, got.dur)
	}
	// The API server's own lease watch is taken out with its pod watches.
	if want := map[string]float64{"pods": 100}; !maps.Equal(got.watchesBy, want) {
		t.Errorf("watches by resource = %v, want %v", got.watchesBy, want)
	}
	if base.watchesBy["pods"] != 2 || base.watchesBy["leases"] != 1 {
		t.Errorf("the baseline's watches by resource = %v, changed by minus", base.watchesBy)
	}
	if total(got.requests) != 10 {
		t.Errorf("total %v", total(got.requests))
	}
}
