package agent

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestStaticRESTMapper(t *testing.T) {
	m := staticRESTMapper(NewScheme())
	cases := []struct {
		gk       schema.GroupKind
		version  string
		resource string
		scope    meta.RESTScopeName
	}{
		{schema.GroupKind{Kind: "Pod"}, "v1", "pods", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Kind: "Node"}, "v1", "nodes", meta.RESTScopeNameRoot},
		{schema.GroupKind{Kind: "ServiceAccount"}, "v1", "serviceaccounts", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Kind: "Endpoints"}, "v1", "endpoints", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "node.k8s.io", Kind: "RuntimeClass"}, "v1", "runtimeclasses", meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, "v1", "leases", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}, "v1", "certificatesigningrequests", meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: "authentication.k8s.io", Kind: "TokenReview"}, "v1", "tokenreviews", meta.RESTScopeNameRoot},
	}
	for _, tc := range cases {
		t.Run(tc.gk.String(), func(t *testing.T) {
			got, err := m.RESTMapping(tc.gk, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if got.Resource.Resource != tc.resource || got.Scope.Name() != tc.scope {
				t.Fatalf("got %s %s, want %s %s", got.Resource.Resource, got.Scope.Name(), tc.resource, tc.scope)
			}
		})
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"}); !meta.IsNoMatchError(err) {
		t.Fatalf("an unknown kind: got %v, want a no-match error (the dynamic mapper answers it)", err)
	}
}

// TestFirstMapperAsksDynamicOnlyForUnknownKinds: a built-in kind is mapped
// without discovery; an unknown one goes to the dynamic mapper.
func TestFirstMapperAsksDynamicOnlyForUnknownKinds(t *testing.T) {
	dyn := &countingMapper{RESTMapper: meta.NewDefaultRESTMapper(nil)}
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	dyn.RESTMapper.(*meta.DefaultRESTMapper).Add(widget, meta.RESTScopeNamespace)
	m := firstMapper{RESTMapper: dyn, static: staticRESTMapper(NewScheme())}
	if _, err := m.RESTMapping(schema.GroupKind{Kind: "Pod"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if dyn.calls != 0 {
		t.Fatalf("a built-in kind asked the dynamic mapper %d times", dyn.calls)
	}
	if _, err := m.RESTMapping(widget.GroupKind(), "v1"); err != nil {
		t.Fatal(err)
	}
	if dyn.calls != 1 {
		t.Fatalf("an unknown kind asked the dynamic mapper %d times, want 1", dyn.calls)
	}
}

type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.RESTMapper.RESTMapping(gk, versions...)
}
