package nodeinfo

import (
	"slices"
	"testing"

	ndf "k8s.io/component-helpers/nodedeclaredfeatures/features"
)

func TestDeclaredFeaturesAreTheRegistrysNames(t *testing.T) {
	var names []string
	for _, f := range ndf.AllFeatures {
		names = append(names, f.Name())
	}
	for _, name := range declarable {
		if !slices.Contains(names, name) {
			t.Errorf("%s is not a node-declared feature of the registry %v", name, names)
		}
	}
}

func TestDeclaredFeaturesFollowTheGates(t *testing.T) {
	all := DeclaredFeatures(func(string) bool { return true })
	if want := []string{"InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers"}; !slices.Equal(all, want) {
		t.Errorf("all gates on: %v, want %v", all, want)
	}
	some := DeclaredFeatures(func(name string) bool { return name != "InPlacePodLevelResourcesVerticalScaling" })
	if want := []string{"InPlacePodVerticalScalingInitContainers"}; !slices.Equal(some, want) {
		t.Errorf("pod-level resize off: %v, want %v", some, want)
	}
	if none := DeclaredFeatures(func(string) bool { return false }); none != nil {
		t.Errorf("all gates off: %v, want none", none)
	}
}
