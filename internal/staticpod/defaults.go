package staticpod

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Priorities of the two built-in priority classes, which the API server's
// priority admission gives to pods that name them.
const (
	SystemNodeCritical    = "system-node-critical"
	SystemClusterCritical = "system-cluster-critical"

	systemNodeCriticalPriority    int32 = 2000001000
	systemClusterCriticalPriority int32 = 2000000000
)

const (
	defaultTerminationGracePeriod int64 = 30
	defaultFileMode               int32 = 0o644
)

// SetDefaults applies to pod the defaults the API server would apply, those
// the pod engine can observe: pod-level policies, the priority of the
// built-in priority classes, and per container, probe, port, resource and
// volume defaults. Fields already set are kept.
func SetDefaults(pod *corev1.Pod) {
	if pod == nil {
		return
	}
	spec := &pod.Spec
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(defaultTerminationGracePeriod)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	if spec.Priority == nil {
		switch spec.PriorityClassName {
		case SystemNodeCritical:
			spec.Priority = ptr.To(systemNodeCriticalPriority)
		case SystemClusterCritical:
			spec.Priority = ptr.To(systemClusterCriticalPriority)
		default:
			spec.Priority = ptr.To(int32(0))
		}
	}
	if spec.PreemptionPolicy == nil {
		spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}

	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		defaultContainer(c, spec.HostNetwork)
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		defaultContainer(c, spec.HostNetwork)
	}
	for i := range spec.EphemeralContainers {
		c := (*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(c, spec.HostNetwork)
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
}

// defaultContainer applies the API server's container defaults.
func defaultContainer(c *corev1.Container, hostNetwork bool) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(probe)
	}
	if c.Lifecycle != nil {
		defaultHandler(c.Lifecycle.PostStart)
		defaultHandler(c.Lifecycle.PreStop)
	}
	// Requests default to limits where unset, as the API server does.
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[name] = limit.DeepCopy()
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil {
			defaultFieldRef(vf.FieldRef)
		}
	}
}

// defaultPullPolicy is Always for an image tagged latest or not tagged nor
// pinned by digest, else IfNotPresent.
func defaultPullPolicy(image string) corev1.PullPolicy {
	ref := image
	hasDigest := false
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
		hasDigest = true
	}
	tag := ""
	last := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		tag = last[i+1:]
	}
	if tag == "latest" || (tag == "" && !hasDigest) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

func defaultHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(g *corev1.HTTPGetAction) {
	if g == nil {
		return
	}
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = corev1.URISchemeHTTP
	}
}

func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// defaultVolume applies the API server's volume defaults: an emptyDir for a
// volume with no source, file modes, hostPath type and field references.
func defaultVolume(v *corev1.Volume) {
	if sourceCount(&v.VolumeSource) == 0 {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if s := v.Secret; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptr.To(defaultFileMode)
	}
	if s := v.ConfigMap; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptr.To(defaultFileMode)
	}
	if s := v.DownwardAPI; s != nil {
		if s.DefaultMode == nil {
			s.DefaultMode = ptr.To(defaultFileMode)
		}
		for i := range s.Items {
			defaultFieldRef(s.Items[i].FieldRef)
		}
	}
	if s := v.Projected; s != nil {
		if s.DefaultMode == nil {
			s.DefaultMode = ptr.To(defaultFileMode)
		}
		for i := range s.Sources {
			if d := s.Sources[i].DownwardAPI; d != nil {
				for j := range d.Items {
					defaultFieldRef(d.Items[j].FieldRef)
				}
			}
			if t := s.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptr.To(int64(3600))
			}
		}
	}
	if s := v.HostPath; s != nil && s.Type == nil {
		s.Type = ptr.To(corev1.HostPathUnset)
	}
	if s := v.Image; s != nil && s.PullPolicy == "" {
		s.PullPolicy = defaultPullPolicy(s.Reference)
	}
}
