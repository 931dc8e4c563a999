package admission

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ReasonAppArmor rejects a pod whose AppArmor profile the node cannot
// enforce, as the kubelet does.
const ReasonAppArmor = "AppArmor"

// AppArmor is what admission knows of the node's AppArmor. Disabled is
// read once, when the policy is built at start: like the kubelet, nodelet
// needs a restart to see AppArmor enabled or disabled. Loaded is read by
// the caller for each decision that needs it (NeedsLoadedProfiles), so a
// profile loaded after nodelet started is admitted: the kubelet does not
// look at loaded profiles at all and admits it too (the runtime then
// fails the container if the profile is still missing); nodelet refuses a
// profile the kernel does not have, at admission, with the reason the
// kubelet gives a node that cannot enforce AppArmor.
type AppArmor struct {
	// Disabled says why the node cannot enforce AppArmor profiles; nil
	// when it can.
	Disabled error
	// Loaded are the names of the profiles the kernel has loaded, as the
	// caller read them for this decision; LoadedErr says why they could
	// not be read.
	Loaded    map[string]bool
	LoadedErr error
}

// AppArmorHost says what the node's kernel enforces.
type AppArmorHost interface {
	// Enabled returns nil when AppArmor is enabled, else why not.
	Enabled() error
	// Loaded returns the names of the profiles the kernel has loaded.
	Loaded() (map[string]bool, error)
}

// SysAppArmor reads AppArmor's state from the kernel's files under Root
// ("/" when empty): /sys/module/apparmor/parameters/enabled and
// /sys/kernel/security/apparmor/profiles.
type SysAppArmor struct{ Root string }

func (s SysAppArmor) path(p string) string { return filepath.Join(cmp.Or(s.Root, "/"), p) }

// Enabled implements AppArmorHost.
func (s SysAppArmor) Enabled() error {
	data, err := os.ReadFile(s.path("sys/module/apparmor/parameters/enabled"))
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("AppArmor is not enabled on the host")
	}
	if err != nil {
		return fmt.Errorf("reading whether AppArmor is enabled: %w", err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("Y")) {
		return errors.New("AppArmor is not enabled on the host")
	}
	return nil
}

// Loaded implements AppArmorHost. Each line of the profiles file is
// "<name> (<mode>)".
func (s SysAppArmor) Loaded() (map[string]bool, error) {
	f, err := os.Open(s.path("sys/kernel/security/apparmor/profiles"))
	if err != nil {
		return nil, fmt.Errorf("listing loaded AppArmor profiles: %w", err)
	}
	defer f.Close()
	loaded := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.LastIndex(line, " ("); i > 0 {
			line = line[:i]
		}
		if line != "" {
			loaded[line] = true
		}
	}
	return loaded, sc.Err()
}

// AppArmorProfile returns the AppArmor profile container c of pod asks for:
// the container's field, else its legacy annotation, else the pod's field;
// nil when none is set.
func AppArmorProfile(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if value, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		return profileFromAnnotation(value)
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.AppArmorProfile
	}
	return nil
}

// profileFromAnnotation converts a legacy annotation value: runtime/default,
// unconfined or localhost/<name>.
func profileFromAnnotation(value string) *v1.AppArmorProfile {
	switch {
	case value == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
	case value == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
	case strings.HasPrefix(value, v1.DeprecatedAppArmorBetaProfileNamePrefix):
		name := strings.TrimPrefix(value, v1.DeprecatedAppArmorBetaProfileNamePrefix)
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	default:
		// Unknown values are refused by API validation; treat what gets
		// through as a profile that must be enforced.
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &value}
	}
}

// confinedProfiles lists the AppArmor profiles the pod's init and regular
// containers ask for, unconfined ones left out.
func confinedProfiles(pod *v1.Pod) []*v1.AppArmorProfile {
	var profiles []*v1.AppArmorProfile
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if p := AppArmorProfile(pod, &list[i]); p != nil && p.Type != v1.AppArmorProfileTypeUnconfined {
				profiles = append(profiles, p)
			}
		}
	}
	return profiles
}

// NeedsLoadedProfiles reports whether deciding on pod needs the profiles
// the kernel has loaded (AppArmor.Loaded): the node can enforce AppArmor
// and the pod asks for a localhost profile.
func (p Policy) NeedsLoadedProfiles(pod *v1.Pod) bool {
	if p.AppArmor.Disabled != nil {
		return false
	}
	for _, prof := range confinedProfiles(pod) {
		if prof.Type == v1.AppArmorProfileTypeLocalhost {
			return true
		}
	}
	return false
}

// admitAppArmor rejects a pod that asks for an AppArmor profile (anything
// but unconfined) on a node without AppArmor, or for a localhost profile
// that is empty or not loaded.
func admitAppArmor(aa AppArmor, pod *v1.Pod) Result {
	profiles := confinedProfiles(pod)
	if len(profiles) == 0 {
		return Result{Admit: true}
	}
	cannot := func(err error) Result { return reject(ReasonAppArmor, "Cannot enforce AppArmor: %v", err) }
	if aa.Disabled != nil {
		return cannot(aa.Disabled)
	}
	for _, p := range profiles {
		if p.Type != v1.AppArmorProfileTypeLocalhost {
			continue
		}
		if p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "" {
			return cannot(errors.New("invalid empty AppArmor profile name"))
		}
		if aa.LoadedErr != nil {
			return cannot(aa.LoadedErr)
		}
		if !aa.Loaded[*p.LocalhostProfile] {
			return cannot(fmt.Errorf("profile %q is not loaded", *p.LocalhostProfile))
		}
	}
	return Result{Admit: true}
}
