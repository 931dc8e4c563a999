package approver

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

const (
	// ConfigurationAPIVersion is the apiVersion of the approver's
	// configuration file.
	ConfigurationAPIVersion = "config.nodelet.io/v1alpha1"
	// ConfigurationKind is its kind.
	ConfigurationKind = "CSRApproverConfiguration"
)

// Configuration is the approver's configuration file (--config). Without
// one the approver approves node client certificates only: serving
// certificates need names an operator chose.
type Configuration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// ServingCertificates says which names a node's serving certificate
	// (signer kubernetes.io/kubelet-serving) may hold.
	ServingCertificates ServingCertificates `json:"servingCertificates"`
}

// ServingCertificates are the names and addresses the approver approves
// in a node's serving certificate: only ones an operator chose, never
// ones a node can choose for itself by writing its own status.
type ServingCertificates struct {
	// DNSNamePatterns: every DNS name of a request must match one. A
	// pattern is a lower-case DNS name, matched exactly, or "*." and a
	// domain of at least two labels, where "*" stands for exactly one
	// label ("*.nodes.example.com" matches "a.nodes.example.com", not
	// "a.b.nodes.example.com" nor "nodes.example.com"). A pattern that
	// could match a cluster DNS name (kubernetes, kubernetes.default, any
	// name with a "svc" or "pod" label, a top-level domain) is refused.
	// Empty: no request with a DNS name is approved.
	DNSNamePatterns []string `json:"dnsNamePatterns,omitempty"`
	// IPCIDRs: every IP of a request must lie in one (10.0.0.0/16,
	// fd00::/64). Empty: no request with an IP is approved.
	IPCIDRs []string `json:"ipCIDRs,omitempty"`
	// ServiceCIDRs are the cluster's Service IP ranges (the API server's
	// --service-cluster-ip-range). No IP in them is ever approved, nor in
	// the ranges of the cluster's ServiceCIDR objects, which the approver
	// reads as well; IPCIDRs may not overlap them.
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
}

// ServingPolicy is ServingCertificates checked and parsed.
type ServingPolicy struct {
	DNSNamePatterns []string
	IPCIDRs         []netip.Prefix
	ServiceCIDRs    []netip.Prefix
}

// LoadConfiguration reads, decodes (strictly: an unknown field is an
// error) and validates the configuration file at path.
func LoadConfiguration(path string) (*Configuration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	cfg := &Configuration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("decoding the configuration %s: %w", path, err)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration %s: %w", path, errs.ToAggregate())
	}
	return cfg, nil
}

// Validate checks the whole configuration, with the field path of each
// problem.
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != ConfigurationAPIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{ConfigurationAPIVersion}))
	}
	if c.Kind != ConfigurationKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{ConfigurationKind}))
	}
	_, servingErrs := c.ServingCertificates.Policy(field.NewPath("servingCertificates"))
	return append(errs, servingErrs...)
}

// Policy checks s and returns it parsed; fldPath is s's path in the file.
func (s ServingCertificates) Policy(fldPath *field.Path) (ServingPolicy, field.ErrorList) {
	var errs field.ErrorList
	p := ServingPolicy{}
	seen := map[string]bool{}
	for i, pattern := range s.DNSNamePatterns {
		path := fldPath.Child("dnsNamePatterns").Index(i)
		if why := invalidDNSNamePattern(pattern); why != "" {
			errs = append(errs, field.Invalid(path, pattern, why))
			continue
		}
		if seen[pattern] {
			errs = append(errs, field.Duplicate(path, pattern))
			continue
		}
		seen[pattern] = true
		p.DNSNamePatterns = append(p.DNSNamePatterns, pattern)
	}
	p.ServiceCIDRs, errs = parseCIDRs(s.ServiceCIDRs, fldPath.Child("serviceCIDRs"), errs)
	p.IPCIDRs, errs = parseCIDRs(s.IPCIDRs, fldPath.Child("ipCIDRs"), errs)
	for i, c := range p.IPCIDRs {
		for _, svc := range p.ServiceCIDRs {
			if c.Overlaps(svc) {
				errs = append(errs, field.Invalid(fldPath.Child("ipCIDRs").Index(i), c.String(),
					fmt.Sprintf("overlaps the service CIDR %s: no Service IP may be in a node's serving certificate", svc)))
			}
		}
	}
	return p, errs
}

// parseCIDRs parses the CIDRs at fldPath: each must be a network address
// (no host bits) and narrower than the whole address space.
func parseCIDRs(in []string, fldPath *field.Path, errs field.ErrorList) ([]netip.Prefix, field.ErrorList) {
	var out []netip.Prefix
	for i, s := range in {
		path := fldPath.Index(i)
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path, s, "not a CIDR: "+err.Error()))
		case p.Addr().Is4In6():
			errs = append(errs, field.Invalid(path, s, "an IPv4-mapped IPv6 range: write the IPv4 range"))
		case p != p.Masked():
			errs = append(errs, field.Invalid(path, s, fmt.Sprintf("has host bits set: the range is %s", p.Masked())))
		case p.Bits() == 0:
			errs = append(errs, field.Invalid(path, s, "matches every address"))
		case slices.Contains(out, p):
			errs = append(errs, field.Duplicate(path, s))
		default:
			out = append(out, p)
		}
	}
	return out, errs
}

// invalidDNSNamePattern returns why pattern is not a DNS name pattern the
// approver accepts, or "".
func invalidDNSNamePattern(pattern string) string {
	rest, wildcard := strings.CutPrefix(pattern, "*.")
	if strings.Contains(rest, "*") {
		return `"*" may only be the whole first label, as in "*.nodes.example.com"`
	}
	if errs := validation.IsDNS1123Subdomain(rest); len(errs) > 0 {
		return "not a lower-case DNS name: " + strings.Join(errs, "; ")
	}
	labels := strings.Split(rest, ".")
	if wildcard && len(labels) < 2 {
		return `a wildcard needs a domain of at least two labels: "*.` + rest + `" matches names of a whole top-level domain`
	}
	if slices.ContainsFunc(labels, isClusterDNSLabel) {
		return `a pattern may not have a "svc" or "pod" label: it could match the DNS name of a Service or a pod`
	}
	// An exact pattern is checked as the name it is; a wildcard as one
	// of the names it matches, all of whose labels it fixes but the first.
	sample := rest
	if wildcard {
		sample = "kubernetes." + rest
	}
	if why := forbiddenDNSName(sample); why != "" {
		return "it matches a name that is never approved: " + why
	}
	return ""
}
