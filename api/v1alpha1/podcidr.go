package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePodCIDR checks podCIDR the way the API server checks a Node's
// spec.podCIDRs: empty, or one or two comma-separated CIDRs, at most one
// per IP family, each a network address.
func validatePodCIDR(path *field.Path, list string) field.ErrorList {
	if list == "" {
		return nil
	}
	parts := strings.Split(list, ",")
	if len(parts) > 2 {
		return field.ErrorList{field.Invalid(path, list, "must be at most two CIDRs, one IPv4 and one IPv6")}
	}
	var errs field.ErrorList
	seen := map[bool]bool{}
	for _, part := range parts {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(part))
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path, list, fmt.Sprintf("%q is not a CIDR", part)))
		case prefix.Masked() != prefix:
			errs = append(errs, field.Invalid(path, list, fmt.Sprintf("%q is not a network address (did you mean %s?)", part, prefix.Masked())))
		case seen[prefix.Addr().Is6()]:
			errs = append(errs, field.Invalid(path, list, "must hold at most one CIDR of each IP family"))
		default:
			seen[prefix.Addr().Is6()] = true
		}
	}
	return errs
}
