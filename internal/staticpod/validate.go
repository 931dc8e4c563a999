package staticpod

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	restartPolicies = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	dnsPolicies     = []corev1.DNSPolicy{corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone}
	pullPolicies    = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	protocols       = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
)

// Validate checks a defaulted static pod for what the API server would
// refuse and the pod engine could not run: names, containers, images,
// policies, ports, volumes and their mounts, resources, and the static pod
// rule that a static pod has no ephemeral containers. Volume sources that
// need API objects (secrets, config maps, claims, service account tokens)
// are allowed: the kubelet runs such static pods too. Validate never panics.
func Validate(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	if pod == nil {
		return append(errs, field.Required(field.NewPath(""), "a pod"))
	}
	meta := field.NewPath("metadata")
	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	if msg := checkUID(string(pod.UID)); pod.UID != "" && msg != "" {
		errs = append(errs, field.Invalid(meta.Child("uid"), string(pod.UID), msg))
	}
	if pod.Namespace == "" {
		errs = append(errs, field.Required(meta.Child("namespace"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
		}
	}
	return append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
}

// maxUIDLength bounds a manifest's own UID: a UUID has 36 characters.
const maxUIDLength = 128

// checkUID says what is wrong with a static pod's UID, or "". A manifest
// may set its own UID, which then names the pod's directory, log directory
// (<namespace>_<name>_<uid>) and cgroup: only letters, digits and '-' are
// safe in all three.
func checkUID(uid string) string {
	if uid == "" || len(uid) > maxUIDLength {
		return fmt.Sprintf("must have 1 to %d characters", maxUIDLength)
	}
	for _, r := range uid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return "must consist of letters, digits and '-'"
		}
	}
	return ""
}

func validateSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes, vErrs := validateVolumes(spec.Volumes, path.Child("volumes"))
	errs = append(errs, vErrs...)

	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "at least one container"))
	}
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("ephemeralContainers"), "static pods may not have ephemeral containers"))
	}
	names := sets.New[string]()
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := path.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(c, p, names, volumes, spec.HostNetwork)...)
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{string(corev1.ContainerRestartPolicyAlways)}))
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := path.Child("containers").Index(i)
		errs = append(errs, validateContainer(c, p, names, volumes, spec.HostNetwork)...)
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(p.Child("restartPolicy"), "only init containers may set a restart policy"))
		}
	}

	if !slices.Contains(restartPolicies, spec.RestartPolicy) {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, restartPolicies))
	}
	if !slices.Contains(dnsPolicies, spec.DNSPolicy) {
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), spec.DNSPolicy, dnsPolicies))
	}
	if spec.DNSPolicy == corev1.DNSNone && spec.DNSConfig == nil {
		errs = append(errs, field.Required(path.Child("dnsConfig"), "must provide dnsConfig when dnsPolicy is None"))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d < 1 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, "must be >= 1"))
	}
	return errs
}

// validateVolumes checks volume names and sources and returns the names.
func validateVolumes(vols []corev1.Volume, path *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range vols {
		v := &vols[i]
		p := path.Index(i)
		errs = append(errs, validateName(v.Name, p.Child("name"), names)...)
		switch n := sourceCount(&v.VolumeSource); {
		case n == 0:
			errs = append(errs, field.Required(p, "must specify a volume type"))
		case n > 1:
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
		}
		if hp := v.HostPath; hp != nil {
			if hp.Path == "" {
				errs = append(errs, field.Required(p.Child("hostPath", "path"), ""))
			}
		}
		if mode := modeOf(v); mode != nil && (*mode < 0 || *mode > 0o777) {
			errs = append(errs, field.Invalid(p, *mode, "defaultMode must be between 0 and 0777"))
		}
	}
	return names, errs
}

// modeOf is the defaultMode of a volume's source, if it has one.
func modeOf(v *corev1.Volume) *int32 {
	switch {
	case v.Secret != nil:
		return v.Secret.DefaultMode
	case v.ConfigMap != nil:
		return v.ConfigMap.DefaultMode
	case v.DownwardAPI != nil:
		return v.DownwardAPI.DefaultMode
	case v.Projected != nil:
		return v.Projected.DefaultMode
	}
	return nil
}

// sourceCount counts the sources a volume sets.
func sourceCount(src *corev1.VolumeSource) int {
	n := 0
	rv := reflect.ValueOf(src).Elem()
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

func validateContainer(c *corev1.Container, path *field.Path, names, volumes sets.Set[string], hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateName(c.Name, path.Child("name"), names)...)
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(path.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	if !slices.Contains(pullPolicies, c.ImagePullPolicy) {
		errs = append(errs, field.NotSupported(path.Child("imagePullPolicy"), c.ImagePullPolicy, pullPolicies))
	}
	portNames := sets.New[string]()
	for i, port := range c.Ports {
		p := path.Child("ports").Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, "must match containerPort when hostNetwork is true"))
		}
		if !slices.Contains(protocols, port.Protocol) {
			errs = append(errs, field.NotSupported(p.Child("protocol"), port.Protocol, protocols))
		}
	}
	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		p := path.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(p.Child("mountPath"), ""))
		} else if mountPaths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(m.MountPath)
	}
	errs = append(errs, validateResources(&c.Resources, path.Child("resources"))...)
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		errs = append(errs, validateProbe(pr.probe, path.Child(pr.name))...)
	}
	return errs
}

// validateName checks a container or volume name is a unique DNS label.
func validateName(name string, path *field.Path, seen sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	switch {
	case name == "":
		errs = append(errs, field.Required(path, ""))
	case seen.Has(name):
		errs = append(errs, field.Duplicate(path, name))
	default:
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(path, name, msg))
		}
	}
	seen.Insert(name)
	return errs
}

func validateResources(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	for name, q := range r.Requests {
		p := path.Child("requests").Key(string(name))
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
		}
		if limit, ok := r.Limits[name]; ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validateProbe(p *corev1.Probe, path *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	handlers := 0
	if p.Exec != nil {
		handlers++
	}
	if p.HTTPGet != nil {
		handlers++
		errs = append(errs, validatePort(p.HTTPGet.Port, path.Child("httpGet", "port"))...)
	}
	if p.TCPSocket != nil {
		handlers++
		errs = append(errs, validatePort(p.TCPSocket.Port, path.Child("tcpSocket", "port"))...)
	}
	if p.GRPC != nil {
		handlers++
		for _, msg := range validation.IsValidPortNum(int(p.GRPC.Port)) {
			errs = append(errs, field.Invalid(path.Child("grpc", "port"), p.GRPC.Port, msg))
		}
	}
	switch {
	case handlers == 0:
		errs = append(errs, field.Required(path, "must specify a handler type"))
	case handlers > 1:
		errs = append(errs, field.Forbidden(path, "may not specify more than 1 handler type"))
	}
	for _, f := range []struct {
		name string
		v    int32
		min  int32
	}{{"initialDelaySeconds", p.InitialDelaySeconds, 0}, {"timeoutSeconds", p.TimeoutSeconds, 1}, {"periodSeconds", p.PeriodSeconds, 1}, {"successThreshold", p.SuccessThreshold, 1}, {"failureThreshold", p.FailureThreshold, 1}} {
		if f.v < f.min {
			errs = append(errs, field.Invalid(path.Child(f.name), f.v, fmt.Sprintf("must be greater than or equal to %d", f.min)))
		}
	}
	return errs
}

// validatePort checks a probe's port: a number in range or a port name.
func validatePort(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(path, port.IntValue(), msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		errs = append(errs, field.Invalid(path, port.StrVal, msg))
	}
	return errs
}
