package objectstore

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestEntryCurrent(t *testing.T) {
	version := func(v string) client.Object {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: v}}
	}
	// Each case is a sequence of observations (nil: the object does not
	// exist) and what a read in each mode gets: the resource version of
	// the content returned, or "" for NotFound.
	for _, tc := range []struct {
		name             string
		observed         []client.Object
		lastSeen, exists string
	}{
		{name: "never observed"},
		{name: "never existed", observed: []client.Object{nil}},
		{name: "exists", observed: []client.Object{version("1")}, lastSeen: "1", exists: "1"},
		{name: "updated", observed: []client.Object{version("1"), version("2")}, lastSeen: "2", exists: "2"},
		{name: "deleted", observed: []client.Object{version("1"), nil}, lastSeen: "1"},
		{name: "deleted twice (a relist)", observed: []client.Object{version("1"), nil, nil}, lastSeen: "1"},
		{name: "created again", observed: []client.Object{version("1"), nil, version("3")}, lastSeen: "3", exists: "3"},
		{name: "created after it was missing", observed: []client.Object{nil, version("2")}, lastSeen: "2", exists: "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEntry(key{kind: KindConfigMap, namespace: "ns", name: "cm"})
			for _, obj := range tc.observed {
				e.record(obj)
			}
			for _, m := range []struct {
				name string
				mode readMode
				want string
			}{{"lastSeen", lastSeen, tc.lastSeen}, {"existing", existing, tc.exists}} {
				obj, err := e.current(m.mode)
				switch {
				case m.want == "" && !apierrors.IsNotFound(err):
					t.Errorf("%s read = %v, %v; want NotFound", m.name, obj, err)
				case m.want != "" && err != nil:
					t.Errorf("%s read: %v; want version %s", m.name, err, m.want)
				case m.want != "" && obj.GetResourceVersion() != m.want:
					t.Errorf("%s read got version %s, want %s", m.name, obj.GetResourceVersion(), m.want)
				}
			}
		})
	}
}

func TestEntryCurrentReturnsACopy(t *testing.T) {
	e := newEntry(key{kind: KindConfigMap, namespace: "ns", name: "cm"})
	e.record(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}})
	obj, err := e.current(existing)
	if err != nil {
		t.Fatalf("current: %v", err)
	}
	obj.(*v1.ConfigMap).Data["k"] = "changed by the caller"
	again, _ := e.current(lastSeen)
	if got := again.(*v1.ConfigMap).Data["k"]; got != "v" {
		t.Errorf("stored content changed through a returned object: %q", got)
	}
}
