package criconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/podspec"
)

// effectiveSecurityContext merges the pod's security context into the
// container's: container settings win.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) v1.SecurityContext {
	var sc v1.SecurityContext
	if c.SecurityContext != nil {
		sc = *c.SecurityContext
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return sc
	}
	if sc.RunAsUser == nil {
		sc.RunAsUser = psc.RunAsUser
	}
	if sc.RunAsGroup == nil {
		sc.RunAsGroup = psc.RunAsGroup
	}
	if sc.RunAsNonRoot == nil {
		sc.RunAsNonRoot = psc.RunAsNonRoot
	}
	if sc.SELinuxOptions == nil {
		sc.SELinuxOptions = psc.SELinuxOptions
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = psc.SeccompProfile
	}
	return sc
}

// containerSecurityContext builds the Linux security context of a container.
func containerSecurityContext(pod *v1.Pod, c *v1.Container, opts ContainerOptions) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := effectiveSecurityContext(pod, c)
	if err := verifyRunAsNonRoot(pod, c, sc, opts.ImageUID, opts.ImageUser); err != nil {
		return nil, err
	}
	seccomp, err := seccompProfile(sc.SeccompProfile, opts.SeccompRoot, opts.SeccompDefault)
	if err != nil {
		return nil, err
	}
	out := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:     capabilities(sc.Capabilities),
		Privileged:       sc.Privileged != nil && *sc.Privileged,
		ReadonlyRootfs:   sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		NoNewPrivs:       sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		NamespaceOptions: namespaceOptions(pod, opts.UserNamespace),
		SelinuxOptions:   seLinuxOptions(sc.SELinuxOptions),
		Seccomp:          seccomp,
		MaskedPaths:      maskedPaths(sc.ProcMount),
		ReadonlyPaths:    readonlyPaths(sc.ProcMount),
	}
	// The string field is what runtimes older than the structured one
	// (containerd 1.6) read.
	out.Apparmor, out.ApparmorProfile = appArmorProfile(admission.AppArmorProfile(pod, c)) //nolint:staticcheck // see above

	switch {
	case sc.RunAsUser != nil:
		out.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
	case opts.ImageUID != nil:
		out.RunAsUser = &runtimeapi.Int64Value{Value: *opts.ImageUID}
	default:
		out.RunAsUsername = opts.ImageUser
	}
	if sc.RunAsGroup != nil {
		out.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		out.SupplementalGroups = supplementalGroups(psc)
		if out.SupplementalGroupsPolicy, err = supplementalGroupsPolicy(psc); err != nil {
			return nil, &ConfigError{Err: err}
		}
	}
	return out, nil
}

// The paths of /proc and /sys a container's procMount Default hides
// (masked) or makes read-only, as the kubelet passes them: containerd
// masks nothing it is not told to (a privileged container gets none
// whatever is passed).
var (
	defaultMaskedPaths = []string{
		"/proc/asound",
		"/proc/acpi",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus",
		"/proc/fs",
		"/proc/irq",
		"/proc/sys",
		"/proc/sysrq-trigger",
	}
)

// maskedPaths are the paths to mask for procMount pm: none for Unmasked
// (which the API server allows only in a user namespace), else the
// defaults.
func maskedPaths(pm *v1.ProcMountType) []string {
	if pm != nil && *pm == v1.UnmaskedProcMount {
		return nil
	}
	return slices.Clone(defaultMaskedPaths)
}

// readonlyPaths are the paths to mount read-only for procMount pm.
func readonlyPaths(pm *v1.ProcMountType) []string {
	if pm != nil && *pm == v1.UnmaskedProcMount {
		return nil
	}
	return slices.Clone(defaultReadonlyPaths)
}

// verifyRunAsNonRoot refuses a container that must not run as root when it
// would, or when that cannot be told from a numeric user; an image whose
// user is unknown is left to the runtime.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, sc v1.SecurityContext, imageUID *int64, imageUser string) error {
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	switch {
	case sc.RunAsUser != nil:
		if *sc.RunAsUser == 0 {
			return &ConfigError{Err: fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podspec.PodDesc(pod), c.Name)}
		}
	case imageUID != nil:
		if *imageUID == 0 {
			return &ConfigError{Err: fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podspec.PodDesc(pod), c.Name)}
		}
	case imageUser != "":
		return &ConfigError{Err: fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", imageUser, podspec.PodDesc(pod), c.Name)}
	}
	return nil
}

func capabilities(caps *v1.Capabilities) *runtimeapi.Capability {
	if caps == nil {
		return nil
	}
	out := &runtimeapi.Capability{}
	for _, c := range caps.Add {
		out.AddCapabilities = append(out.AddCapabilities, string(c))
	}
	for _, c := range caps.Drop {
		out.DropCapabilities = append(out.DropCapabilities, string(c))
	}
	return out
}

// appArmorProfile converts an AppArmor profile to the CRI's field and, for
// runtimes older than that field, its string form; none leaves the choice
// to the runtime. Admission already refused profiles the node cannot
// enforce.
func appArmorProfile(p *v1.AppArmorProfile) (*runtimeapi.SecurityProfile, string) {
	if p == nil {
		return nil, ""
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, v1.DeprecatedAppArmorBetaProfileRuntimeDefault
	case v1.AppArmorProfileTypeLocalhost:
		name := ptr.Deref(p.LocalhostProfile, "")
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: name},
			v1.DeprecatedAppArmorBetaProfileNamePrefix + name
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, v1.DeprecatedAppArmorBetaProfileNameUnconfined
	}
}

// seccompProfile converts a seccomp profile; none means the runtime's
// default with seccompDefault, else unconfined, as the kubelet does.
func seccompProfile(p *v1.SeccompProfile, root string, seccompDefault bool) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if seccompDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, &ConfigError{Err: errors.New("localhost seccomp profile without a path")}
		}
		if !filepath.IsLocal(*p.LocalhostProfile) {
			return nil, &ConfigError{Err: fmt.Errorf("localhost seccomp profile %q must be a path below the profile root %s", *p.LocalhostProfile, root)}
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(root, *p.LocalhostProfile),
		}, nil
	}
	return nil, &ConfigError{Err: fmt.Errorf("unsupported seccomp profile type %q", p.Type)}
}
