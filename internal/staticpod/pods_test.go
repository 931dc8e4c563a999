package staticpod

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pod is a static pod named name whose UID is uid.
func pod(name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid),
		Annotations: map[string]string{ConfigHashAnnotationKey: uid}}}
}

func names(pods []*corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Name+"@"+string(p.UID))
	}
	return strings.Join(s, ",")
}

func TestPodsSet(t *testing.T) {
	labelled := pod("a", "1")
	labelled.Labels = map[string]string{"x": "y"}
	type step struct {
		source                  string
		pods                    []*corev1.Pod
		added, updated, removed string
		dupes                   int
		list                    string
	}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "add, keep, change, remove",
		steps: []step{
			{source: SourceFile, pods: []*corev1.Pod{pod("a", "1"), pod("b", "2")}, added: "a@1,b@2", list: "a@1,b@2"},
			{source: SourceFile, pods: []*corev1.Pod{pod("a", "1"), pod("b", "2")}, list: "a@1,b@2"},
			{source: SourceFile, pods: []*corev1.Pod{pod("a", "1"), pod("b", "3")}, added: "b@3", removed: "b@2", list: "a@1,b@3"},
			{source: SourceFile, pods: []*corev1.Pod{labelled}, updated: "a@1", removed: "b@3", list: "a@1"},
			{source: SourceFile, pods: nil, removed: "a@1", list: ""},
		},
	}, {
		name: "sources are independent",
		steps: []step{
			{source: SourceFile, pods: []*corev1.Pod{pod("a", "1")}, added: "a@1", list: "a@1"},
			{source: SourceHTTP, pods: []*corev1.Pod{pod("b", "2")}, added: "b@2", list: "a@1,b@2"},
			{source: SourceFile, pods: nil, removed: "a@1", list: "b@2"},
		},
	}, {
		name: "the first source wins a name, whatever the order of the sets",
		steps: []step{
			{source: SourceHTTP, pods: []*corev1.Pod{pod("a", "2")}, added: "a@2", list: "a@2"},
			{source: SourceFile, pods: []*corev1.Pod{pod("a", "1")}, added: "a@1", removed: "a@2", dupes: 1, list: "a@1"},
			{source: SourceHTTP, pods: []*corev1.Pod{pod("a", "2"), pod("c", "3")}, added: "c@3", dupes: 1, list: "a@1,c@3"},
			{source: SourceFile, pods: nil, added: "a@2", removed: "a@1", list: "a@2,c@3"},
		},
	}, {
		name: "within a source the first pod of a name wins",
		steps: []step{
			{source: SourceFile, pods: []*corev1.Pod{pod("a", "1"), pod("a", "2")}, added: "a@1", dupes: 1, list: "a@1"},
		},
	}, {
		name: "the same UID twice is left out",
		steps: []step{
			{source: SourceFile, pods: []*corev1.Pod{pod("a", "1")}, added: "a@1", list: "a@1"},
			{source: SourceHTTP, pods: []*corev1.Pod{pod("b", "1")}, dupes: 1, list: "a@1"},
		},
	}, {
		name: "a source not named at the start ranks last",
		steps: []step{
			{source: "other", pods: []*corev1.Pod{pod("a", "9")}, added: "a@9", list: "a@9"},
			{source: SourceHTTP, pods: []*corev1.Pod{pod("a", "2")}, added: "a@2", removed: "a@9", dupes: 1, list: "a@2"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPods(SourceFile, SourceHTTP)
			for i, s := range tc.steps {
				changed, dupes := p.Set(s.source, s.pods)
				got := fmt.Sprintf("added %q updated %q removed %q dupes %d list %q",
					names(changed.Added), names(changed.Updated), names(changed.Removed), len(dupes), names(p.List()))
				want := fmt.Sprintf("added %q updated %q removed %q dupes %d list %q", s.added, s.updated, s.removed, s.dupes, s.list)
				if got != want {
					t.Errorf("step %d:\n got %s\nwant %s", i, got, want)
				}
				for _, d := range dupes {
					if d.Err == nil || d.Source == "" {
						t.Errorf("step %d: problem without source or error: %+v", i, d)
					}
				}
			}
		})
	}
}

// An unchanged pod keeps its identity and first-seen time; an updated one
// keeps the first-seen time; a new one gets the time of its Set.
func TestPodsSeen(t *testing.T) {
	p := NewPods(SourceFile)
	t0 := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	clock := t0
	p.now = func() time.Time { return clock }
	in := pod("a", "1")
	changed, _ := p.Set(SourceFile, []*corev1.Pod{in})
	first := changed.Added[0]
	if first == in {
		t.Error("Set keeps the caller's pod instead of a copy")
	}
	if _, ok := in.Annotations[ConfigFirstSeenAnnotationKey]; ok {
		t.Error("Set modified the caller's pod")
	}
	if got := first.Annotations[ConfigFirstSeenAnnotationKey]; got != t0.Format(time.RFC3339Nano) {
		t.Errorf("config.seen %q", got)
	}
	if got := first.Annotations[ConfigSourceAnnotationKey]; got != SourceFile {
		t.Errorf("config.source %q", got)
	}

	clock = t0.Add(time.Hour)
	changed, _ = p.Set(SourceFile, []*corev1.Pod{pod("a", "1")})
	if !changed.Empty() {
		t.Errorf("unchanged pod reported as a change: %+v", changed)
	}
	if got, _ := p.ByUID("1"); got != first {
		t.Error("unchanged pod lost its identity")
	}

	relabelled := pod("a", "1")
	relabelled.Labels = map[string]string{"x": "y"}
	changed, _ = p.Set(SourceFile, []*corev1.Pod{relabelled})
	if len(changed.Updated) != 1 || changed.Updated[0].Annotations[ConfigFirstSeenAnnotationKey] != t0.Format(time.RFC3339Nano) || changed.Updated[0].Labels["x"] != "y" {
		t.Errorf("update %+v", changed.Updated)
	}
	if got, ok := p.Get("default", "a"); !ok || got != changed.Updated[0] {
		t.Errorf("Get after update: %v %v", got, ok)
	}

	changed, _ = p.Set(SourceFile, []*corev1.Pod{pod("a", "2")})
	if len(changed.Added) != 1 || changed.Added[0].Annotations[ConfigFirstSeenAnnotationKey] != clock.Format(time.RFC3339Nano) {
		t.Errorf("new version of a manifest: %+v", changed.Added)
	}
	if _, ok := p.ByUID("1"); ok {
		t.Error("old UID still there")
	}
	if _, ok := p.Get("default", "b"); ok {
		t.Error("Get of a pod that is not there")
	}
}

func TestPodsConcurrent(t *testing.T) {
	p := NewPods(SourceFile, SourceHTTP)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			source := []string{SourceFile, SourceHTTP}[i%2]
			for j := range 100 {
				p.Set(source, []*corev1.Pod{pod(fmt.Sprintf("p%d", j%3), fmt.Sprintf("%s-%d", source, j%5))})
				p.List()
				p.Get("default", "p1")
			}
		})
	}
	wg.Wait()
	list := p.List()
	if !slices.IsSortedFunc(list, func(a, b *corev1.Pod) int { return strings.Compare(FullName(a), FullName(b)) }) {
		t.Errorf("List not sorted: %s", names(list))
	}
}
