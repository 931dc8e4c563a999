package nodeinfo

import (
	"slices"

	"github.com/nodelet/nodelet/internal/features"
)

// declarable are the node-declared features nodelet implements, by the
// gate that names each (k8s.io/component-helpers/nodedeclaredfeatures):
// the API server refuses a pod update that needs a feature the pod's node
// does not declare. The others of the registry are left out until nodelet
// implements them: RestartAllContainersOnContainerExits (a restart rule's
// RestartAllContainers restarts only its own container), the DRA ones
// (no DRA), ExtendWebSocketsToKubelet, InPlacePodVerticalScalingMemoryBackedVolumes,
// UserNamespacesHostNetworkSupport and VolumeBindMountOptions.
var declarable = []string{
	string(features.InPlacePodLevelResourcesVerticalScaling),
	string(features.InPlacePodVerticalScalingInitContainers),
}

// DeclaredFeatures returns the Node's status.declaredFeatures: the
// features nodelet implements whose gate enabled reports on, sorted.
func DeclaredFeatures(enabled func(name string) bool) []string {
	var out []string
	for _, name := range declarable {
		if enabled(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
