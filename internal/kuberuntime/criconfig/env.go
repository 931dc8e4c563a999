package criconfig

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// ExpandSubPathExpr expands a volumeMount's subPathExpr with env, the
// container's resolved environment, as the kubelet does: each $(NAME) is
// replaced by NAME's value and $$ stands for a literal $. Unlike in command
// and args, a reference must resolve: a name env lacks, or whose value is
// empty, is an error naming every such variable, sorted ("missing value for
// A, B"), the kubelet's message. The result is not validated; an absolute
// path or a ".." component is for the caller to refuse.
func ExpandSubPathExpr(expr string, env []EnvVar) (string, error) {
	values := make(map[string]string, len(env))
	for _, e := range env {
		values[e.Name] = e.Value
	}
	var missing []string
	expanded := podspec.ExpandVars(expr, func(name string) (string, bool) {
		v := values[name]
		if v == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return v, true
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("missing value for %s", strings.Join(missing, ", "))
	}
	return expanded, nil
}

// EnvVar is one resolved environment variable.
type EnvVar struct {
	Name  string
	Value string
}

// envList is an ordered set of variables: a name keeps the position it was
// first defined at and the value it was last given.
type envList struct {
	vars  []EnvVar
	index map[string]int
}

func (l *envList) set(name, value string) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.vars[i].Value = value
		return
	}
	l.index[name] = len(l.vars)
	l.vars = append(l.vars, EnvVar{Name: name, Value: value})
}

func (l *envList) get(name string) (string, bool) {
	i, ok := l.index[name]
	if !ok {
		return "", false
	}
	return l.vars[i].Value, true
}

// envResolver resolves one container's environment.
type envResolver struct {
	pod  *v1.Pod
	c    *v1.Container
	opts *ContainerOptions
}

// ContainerEnv resolves the environment of a container the way the kubelet
// does: envFrom sources first (keys sorted within each source, with their
// prefix), then env in order, each value expanding $(VAR) references to the
// variables defined so far and to the service variables, each valueFrom
// resolved from the downward API, resources or the ConfigMaps and Secrets
// in opts; service variables not otherwise defined come last. A missing
// non-optional ConfigMap, Secret or key is a *ConfigError.
func ContainerEnv(pod *v1.Pod, c *v1.Container, opts ContainerOptions) ([]EnvVar, error) {
	r := envResolver{pod: pod, c: c, opts: &opts}
	var env envList
	for _, from := range c.EnvFrom {
		if err := r.addEnvFrom(&env, from); err != nil {
			return nil, err
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env.get(name); ok {
			return v, true
		}
		v, ok := opts.ServiceEnv[name]
		return v, ok
	}
	for _, e := range c.Env {
		switch {
		case e.Value != "":
			env.set(e.Name, podspec.ExpandVars(e.Value, lookup))
		case e.ValueFrom != nil:
			v, skip, err := r.valueFrom(e.ValueFrom)
			if err != nil {
				return nil, fmt.Errorf("resolving env var %s: %w", e.Name, err)
			}
			if !skip {
				env.set(e.Name, v)
			}
		default:
			env.set(e.Name, "")
		}
	}
	names := make([]string, 0, len(opts.ServiceEnv))
	for name := range opts.ServiceEnv {
		if _, ok := env.get(name); !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		env.set(name, opts.ServiceEnv[name])
	}
	return env.vars, nil
}

func (r *envResolver) addEnvFrom(env *envList, from v1.EnvFromSource) error {
	var data map[string]string
	switch {
	case from.ConfigMapRef != nil:
		cm, err := r.configMap(from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
		if err != nil || cm == nil {
			return err
		}
		data = cm.Data
	case from.SecretRef != nil:
		s, err := r.secret(from.SecretRef.Name, from.SecretRef.Optional)
		if err != nil || s == nil {
			return err
		}
		data = map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env.set(from.Prefix+k, data[k])
	}
	return nil
}

// valueFrom resolves one valueFrom source; skip is true when an optional
// source is missing and the variable must not be set.
func (r *envResolver) valueFrom(src *v1.EnvVarSource) (value string, skip bool, err error) {
	switch {
	case src.FieldRef != nil:
		v, err := r.fieldRef(src.FieldRef)
		return v, false, err
	case src.ResourceFieldRef != nil:
		v, err := r.resourceFieldRef(src.ResourceFieldRef)
		return v, false, err
	case src.ConfigMapKeyRef != nil:
		return r.configMapKey(src.ConfigMapKeyRef)
	case src.SecretKeyRef != nil:
		return r.secretKey(src.SecretKeyRef)
	case src.FileKeyRef != nil:
		return r.fileKey(src.FileKeyRef)
	}
	return "", false, &ConfigError{Err: errors.New("unsupported valueFrom source")}
}

func (r *envResolver) configMap(name string, optional *bool) (*v1.ConfigMap, error) {
	if cm, ok := r.opts.ConfigMaps[name]; ok && cm != nil {
		return cm, nil
	}
	if optional != nil && *optional {
		return nil, nil
	}
	return nil, &ConfigError{Err: fmt.Errorf("configmap %q not found", name)}
}

func (r *envResolver) secret(name string, optional *bool) (*v1.Secret, error) {
	if s, ok := r.opts.Secrets[name]; ok && s != nil {
		return s, nil
	}
	if optional != nil && *optional {
		return nil, nil
	}
	return nil, &ConfigError{Err: fmt.Errorf("secret %q not found", name)}
}

func (r *envResolver) configMapKey(ref *v1.ConfigMapKeySelector) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	cm, err := r.configMap(ref.Name, ref.Optional)
	if err != nil || cm == nil {
		return "", true, err
	}
	if v, ok := cm.Data[ref.Key]; ok {
		return v, false, nil
	}
	if optional {
		return "", true, nil
	}
	return "", false, &ConfigError{Err: fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, r.pod.Namespace, ref.Name)}
}

func (r *envResolver) secretKey(ref *v1.SecretKeySelector) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	s, err := r.secret(ref.Name, ref.Optional)
	if err != nil || s == nil {
		return "", true, err
	}
	if v, ok := s.Data[ref.Key]; ok {
		return string(v), false, nil
	}
	if optional {
		return "", true, nil
	}
	return "", false, &ConfigError{Err: fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, r.pod.Namespace, ref.Name)}
}

// fileKey resolves a fileKeyRef: key in the env file at path in an
// emptyDir volume of the pod, which an init container wrote. A key that is
// missing or empty skips an optional variable, as the kubelet's.
func (r *envResolver) fileKey(ref *v1.FileKeySelector) (string, bool, error) {
	optional := ref.Optional != nil && *ref.Optional
	if r.opts.OpenVolumeFile == nil {
		// The EnvFiles gate is off: the kubelet sets the variable empty.
		return "", false, nil
	}
	f, err := r.opts.OpenVolumeFile(ref.VolumeName, ref.Path)
	if err != nil {
		return "", false, &ConfigError{Err: fmt.Errorf("reading the env file of FileKeyRef %s: %w", ref.Key, err)}
	}
	defer f.Close()
	v, err := envFileValue(f, ref.Key)
	if err != nil {
		return "", false, &ConfigError{Err: fmt.Errorf("couldn't parse env file %s in volume %q: %w", ref.Path, ref.VolumeName, err)}
	}
	if v == "" {
		if optional {
			return "", true, nil
		}
		return "", false, &ConfigError{Err: fmt.Errorf("environment variable key %q not found in file %q of volume %q", ref.Key, ref.Path, ref.VolumeName)}
	}
	return v, false, nil
}

// fieldRef resolves a downward API field of the pod.
func (r *envResolver) fieldRef(ref *v1.ObjectFieldSelector) (string, error) {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		return "", &ConfigError{Err: fmt.Errorf("unsupported fieldRef API version %q", ref.APIVersion)}
	}
	v, err := podspec.PodFieldValue(r.pod, ref.FieldPath, r.opts.podIPs(r.pod), r.opts.HostIPs)
	if err != nil {
		return "", &ConfigError{Err: err}
	}
	return v, nil
}

// resourceFieldRef resolves limits.* or requests.* of a container, divided by
// the divisor and rounded up; a missing limit of cpu, memory or
// ephemeral-storage defaults to the node's allocatable amount.
func (r *envResolver) resourceFieldRef(ref *v1.ResourceFieldSelector) (string, error) {
	c := r.c
	if ref.ContainerName != "" {
		if c = podspec.ContainerSpec(r.pod, ref.ContainerName); c == nil {
			return "", &ConfigError{Err: fmt.Errorf("container %q in resourceFieldRef not found", ref.ContainerName)}
		}
	}
	v, err := podspec.ResourceFieldValue(c, ref.Resource, ref.Divisor, r.opts.NodeAllocatable)
	if err != nil {
		return "", &ConfigError{Err: err}
	}
	return v, nil
}
