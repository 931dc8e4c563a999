package objectstore

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Kind is the kind of a referenced object.
type Kind string

// The kinds the store holds.
const (
	KindConfigMap Kind = "ConfigMap"
	KindSecret    Kind = "Secret"
)

// resource is the kind's API resource, used in metrics and NotFound errors.
func (k Kind) resource() string {
	switch k {
	case KindConfigMap:
		return "configmaps"
	case KindSecret:
		return "secrets"
	}
	return string(k)
}

// References are the names of the ConfigMaps and Secrets a pod references,
// all in the pod's namespace, each sorted and without duplicates.
type References struct {
	ConfigMaps []string
	Secrets    []string
}

// Names returns the names of kind k.
func (r References) Names(k Kind) []string {
	if k == KindSecret {
		return r.Secrets
	}
	return r.ConfigMaps
}

// PodReferences returns the ConfigMaps and Secrets pod references: through
// configMap, secret and projected (configMap and secret sources) volumes,
// the env and envFrom of its containers, init containers and ephemeral
// containers, and its imagePullSecrets. Optional references are included:
// an optional object that appears later is still used. It does no I/O.
//
// Volume types nodelet does not mount (CSI, flexVolume, ... secret
// references) are left out, so no object is watched that nothing reads.
func PodReferences(pod *v1.Pod) References {
	cms, secrets := map[string]struct{}{}, map[string]struct{}{}
	addCM := func(name string) {
		if name != "" {
			cms[name] = struct{}{}
		}
	}
	addSecret := func(name string) {
		if name != "" {
			secrets[name] = struct{}{}
		}
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		addSecret(ref.Name)
	}
	for i := range pod.Spec.Volumes {
		src := &pod.Spec.Volumes[i].VolumeSource
		switch {
		case src.ConfigMap != nil:
			addCM(src.ConfigMap.Name)
		case src.Secret != nil:
			addSecret(src.Secret.SecretName)
		case src.Projected != nil:
			for _, p := range src.Projected.Sources {
				if p.ConfigMap != nil {
					addCM(p.ConfigMap.Name)
				}
				if p.Secret != nil {
					addSecret(p.Secret.Name)
				}
			}
		}
	}
	visitEnv := func(envFrom []v1.EnvFromSource, env []v1.EnvVar) {
		for _, from := range envFrom {
			if from.ConfigMapRef != nil {
				addCM(from.ConfigMapRef.Name)
			}
			if from.SecretRef != nil {
				addSecret(from.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
				addCM(ref.Name)
			}
			if ref := e.ValueFrom.SecretKeyRef; ref != nil {
				addSecret(ref.Name)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visitEnv(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.Containers {
		visitEnv(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visitEnv(c.EnvFrom, c.Env)
	}
	return References{ConfigMaps: sortedKeys(cms), Secrets: sortedKeys(secrets)}
}

// NeedsServiceLinks says whether pod's containers get the Docker-link
// variables of the Services of its namespace (enableServiceLinks, default
// true). Every pod gets the default/kubernetes variables regardless.
func NeedsServiceLinks(pod *v1.Pod) bool {
	return pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
}

func sortedKeys(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
