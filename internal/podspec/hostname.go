package podspec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// maxHostnameLen is the longest hostname the kernel takes.
	maxHostnameLen = 63
	// maxFQDNLen is the longest FQDN the kernel's nodename field takes.
	maxFQDNLen = 64
)

// PodHostnameAndDomain returns a pod's hostname and DNS domain as the
// kubelet makes them: spec.hostnameOverride alone, with no domain, when set
// (it must be a DNS subdomain); else spec.hostname or the pod name, and
// <subdomain>.<namespace>.svc.<clusterDomain> when the pod has a subdomain
// and the node a cluster domain. The hostname is cut to 63 characters,
// without a trailing '-' or '.'.
func PodHostnameAndDomain(pod *v1.Pod, clusterDomain string) (string, string, error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		h, err := truncateHostname(pod, *o)
		return h, "", err
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	hostname, err := truncateHostname(pod, hostname)
	if err != nil {
		return "", "", err
	}
	if pod.Spec.Subdomain == "" || clusterDomain == "" {
		return hostname, "", nil
	}
	return hostname, fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain), nil
}

// truncateHostname cuts hostname to 63 characters without a trailing '-'
// or '.'.
func truncateHostname(pod *v1.Pod, hostname string) (string, error) {
	if len(hostname) <= maxHostnameLen {
		return hostname, nil
	}
	hostname = strings.TrimRight(hostname[:maxHostnameLen], "-.")
	if hostname == "" {
		return "", fmt.Errorf("hostname of pod %q is invalid", pod.Name)
	}
	return hostname, nil
}

// PodHostname returns the hostname of a pod that does not use the host
// network (PodHostnameAndDomain), or its FQDN <hostname>.<domain> when
// setHostnameAsFQDN is set and it has a domain.
func PodHostname(pod *v1.Pod, clusterDomain string) (string, error) {
	hostname, domain, err := PodHostnameAndDomain(pod, clusterDomain)
	if err != nil {
		return "", err
	}
	if domain == "" || pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > maxFQDNLen {
		return "", fmt.Errorf("FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, maxFQDNLen, len(fqdn))
	}
	return fqdn, nil
}
