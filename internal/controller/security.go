package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/nodeinfo"
)

// admissionPolicy builds what the node allows pods from the configuration
// and the host, read once here: the safe sysctls of the running kernel plus
// the configured unsafe ones, and whether the node can enforce AppArmor.
func admissionPolicy(cfg *v1alpha1.NodeletConfiguration, host nodeinfo.Host, appArmor admission.AppArmorHost) (admission.Policy, error) {
	var kernel *version.Version
	if release, err := host.KernelRelease(); err == nil {
		// An unparsable release leaves kernel nil: only the sysctls every
		// kernel namespaces are safe then.
		kernel, _ = version.ParseGeneric(release)
	}
	sysctls, err := admission.NewSysctlAllowlist(kernel, cfg.AllowedUnsafeSysctls)
	if err != nil {
		return admission.Policy{}, fmt.Errorf("building the sysctl allowlist: %w", err)
	}
	return admission.Policy{Sysctls: sysctls, AppArmor: admission.AppArmor{Disabled: appArmor.Enabled()}}, nil
}
