package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the configuration API.
var GroupVersion = schema.GroupVersion{Group: "config.nodelet.io", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the configuration types and their defaulters.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs)
	// AddToScheme adds the configuration types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &NodeletConfiguration{})
	return nil
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&NodeletConfiguration{}, func(obj any) {
		SetDefaults(obj.(*NodeletConfiguration))
	})
	return nil
}
