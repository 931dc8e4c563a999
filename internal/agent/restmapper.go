package agent

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// clusterScoped are the built-in kinds that are not namespaced.
var clusterScoped = map[string]bool{
	"Node": true, "Namespace": true, "PersistentVolume": true, "ComponentStatus": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "StorageClass": true, "CSIDriver": true,
	"CSINode": true, "VolumeAttachment": true, "VolumeAttributesClass": true, "RuntimeClass": true,
	"PriorityClass": true, "CertificateSigningRequest": true, "ClusterTrustBundle": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"TokenReview": true, "SelfSubjectReview": true, "SubjectAccessReview": true,
	"SelfSubjectAccessReview": true, "SelfSubjectRulesReview": true, "FlowSchema": true,
	"PriorityLevelConfiguration": true, "IngressClass": true, "IPAddress": true, "ServiceCIDR": true,
	"ResourceSlice": true, "DeviceClass": true, "DeviceTaintRule": true, "StorageVersion": true,
	"StorageVersionMigration": true, "APIService": true, "CustomResourceDefinition": true,
}

// staticRESTMapper maps every object kind of scheme without asking the API
// server, so that informers and clients of built-in types can be made
// while no API server answers (a node that starts its own control plane).
func staticRESTMapper(scheme *runtime.Scheme) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") ||
			strings.HasSuffix(gvk.Kind, "Options") || gvk.Kind == "WatchEvent" || gvk.Kind == "Status" {
			continue
		}
		scope := meta.RESTScopeNamespace
		if clusterScoped[gvk.Kind] {
			scope = meta.RESTScopeRoot
		}
		m.Add(gvk, scope)
	}
	return m
}

// firstMapper answers from the static mapper and asks the dynamic one (the
// API server's discovery) only for kinds it does not know, such as the
// custom resources an extension's reconciler watches.
type firstMapper struct {
	meta.RESTMapper // the dynamic mapper
	static          meta.RESTMapper
}

func (m firstMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if r, err := m.static.RESTMapping(gk, versions...); err == nil {
		return r, nil
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func (m firstMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	if r, err := m.static.RESTMappings(gk, versions...); err == nil && len(r) > 0 {
		return r, nil
	}
	return m.RESTMapper.RESTMappings(gk, versions...)
}

func (m firstMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	if k, err := m.static.KindFor(resource); err == nil {
		return k, nil
	}
	return m.RESTMapper.KindFor(resource)
}

// newMapper is the manager's MapperProvider.
func newMapper(scheme *runtime.Scheme) func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	return func(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
		dynamic, err := apiutil.NewDynamicRESTMapper(cfg, hc)
		if err != nil {
			return nil, err
		}
		return firstMapper{RESTMapper: dynamic, static: staticRESTMapper(scheme)}, nil
	}
}
