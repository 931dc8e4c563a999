package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

func TestEventCacheEntries(t *testing.T) {
	for _, tc := range []struct {
		maxPods int32
		want    int
	}{
		{0, minEventCacheEntries},
		{10, minEventCacheEntries},
		{110, 880},
		{250, 2000},
	} {
		if got := eventCacheEntries(tc.maxPods); got != tc.want {
			t.Errorf("eventCacheEntries(%d) = %d, want %d", tc.maxPods, got, tc.want)
		}
	}
}

func TestEventsGoThroughTheNodesSink(t *testing.T) {
	cfg := &v1alpha1.NodeletConfiguration{}
	v1alpha1.SetDefaults(cfg)
	cfg.NodeName, cfg.MaxPods = "node-a", 50
	cfg.MetricsBindAddress, cfg.HealthzBindAddress = "0", "0"
	mgr, err := NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := mgr.(*withHealth)
	// A manager stopped before anything asked for a recorder still hands
	// out one that works.
	stoppedFirst := &withHealth{Manager: mgr, sink: &eventSink{entries: 10}}
	stoppedFirst.sink.shutdown()
	stoppedFirst.GetEventRecorderFor("late").Event(&corev1.Pod{}, corev1.EventTypeNormal, "Started", "no panic")
	if m.sink == nil || m.sink.entries != 400 {
		t.Fatalf("the sink of a 50-pod node: %+v, want one of 400 entries", m.sink)
	}
	if mgr.GetConfig().ContentType != runtime.ContentTypeProtobuf {
		t.Errorf("the manager's content type is %q, want protobuf", mgr.GetConfig().ContentType)
	}
	rec := m.GetEventRecorderFor("nodelet")
	b := m.sink.b
	if b == nil {
		t.Fatal("a recorder was made without the node's sink")
	}
	m.GetEventRecorderFor("other")
	if m.sink.b != b {
		t.Error("a second recorder made a second broadcaster")
	}
	m.sink.shutdown()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	rec.Event(pod, corev1.EventTypeNormal, "Started", "after the shutdown")
	m.GetEventRecorderFor("late").Event(pod, corev1.EventTypeNormal, "Started", "a recorder asked for after the shutdown records nothing")
}

func TestConfigzHandler(t *testing.T) {
	cfg := &v1alpha1.NodeletConfiguration{NodeName: "node-a", MaxPods: 110}
	cfg.APIVersion, cfg.Kind = "config.nodelet.io/v1alpha1", "NodeletConfiguration"
	h, err := ConfigzHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/configz", http.NoBody))
	var body struct {
		Config v1alpha1.NodeletConfiguration `json:"nodeletconfig"`
	}
	if err := json.NewDecoder(w.Body).Decode(&body); err != nil || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("decoding /configz: %v, content type %q", err, w.Header().Get("Content-Type"))
	}
	if body.Config.NodeName != "node-a" || body.Config.MaxPods != 110 || body.Config.Kind != "NodeletConfiguration" {
		t.Errorf("/configz served %+v", body.Config)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/configz", http.NoBody))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /configz: %d", w.Code)
	}
}

func TestIsLoopbackAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:10249": true, "[::1]:10249": true, "localhost:1": true,
		"0.0.0.0:10249": false, ":10249": false, "10.0.0.1:10249": false, "0": false,
	} {
		if got := IsLoopbackAddress(addr); got != want {
			t.Errorf("IsLoopbackAddress(%q) = %v, want %v", addr, got, want)
		}
	}
}
