package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

const (
	etcHostsMode                  fs.FileMode = 0o644
	managedHostsHeader                        = "# Kubernetes-managed hosts file.\n"
	managedHostNetworkHostsHeader             = "# Kubernetes-managed hosts file (host network).\n"
)

// WriteEtcHosts writes the pod's /etc/hosts, which Mounts then mounts into
// every container that does not mount something else there. For a pod on
// the pod network it holds the localhost entries and each of podIPs with the
// pod's hostname (and FQDN when the pod has a subdomain); a host-network pod
// gets a copy of the node's hosts file. Both end with the pod's hostAliases.
// Call it once the sandbox has its IPs; with no IPs and no host network it
// writes nothing, so no /etc/hosts is mounted, as with the kubelet. The file
// is rewritten in place, because containers bind-mount it.
func (m *Manager) WriteEtcHosts(pod *v1.Pod, podIPs []string) error {
	if len(podIPs) == 0 && !pod.Spec.HostNetwork {
		return nil
	}
	content, err := m.etcHostsContent(pod, podIPs)
	if err != nil {
		return fmt.Errorf("building /etc/hosts of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	path := m.etcHostsFile(pod)
	if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, content) {
		return nil
	}
	err = writeFileMode(path, content, etcHostsMode)
	if errors.Is(err, fs.ErrNotExist) {
		// The pod's directory is made by SetUp; a pod whose volumes
		// failed may have none yet.
		if err := m.ensurePodDir(pod.UID); err != nil {
			return err
		}
		err = writeFileMode(path, content, etcHostsMode)
	}
	if err != nil {
		return fmt.Errorf("writing /etc/hosts of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (m *Manager) etcHostsFile(pod *v1.Pod) string {
	return filepath.Join(m.PodDir(pod.UID), etcHostsFileName)
}

func (m *Manager) etcHostsContent(pod *v1.Pod, podIPs []string) ([]byte, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(m.nodeHostsFile)
		if err != nil {
			return nil, fmt.Errorf("reading the node's hosts file: %w", err)
		}
		b.WriteString(managedHostNetworkHostsHeader)
		b.Write(node)
	} else {
		b.WriteString(managedHostsHeader)
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		hostname, domain, err := m.hostnameAndDomain(pod)
		if err != nil {
			return nil, err
		}
		names := hostname
		if domain != "" {
			names = hostname + "." + domain + "\t" + hostname
		}
		for _, ip := range podIPs {
			fmt.Fprintf(&b, "%s\t%s\n", ip, names)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes(), nil
}

// hostnameAndDomain returns the pod's hostname and domain as its sandbox
// has them (podspec.PodHostnameAndDomain).
func (m *Manager) hostnameAndDomain(pod *v1.Pod) (string, string, error) {
	return podspec.PodHostnameAndDomain(pod, m.clusterDomain)
}

// etcHostsMount mounts the pod's hosts file at /etc/hosts if WriteEtcHosts
// wrote one and no volumeMount uses that path.
func (m *Manager) etcHostsMount(pod *v1.Pod, covered map[string]bool) (*runtimeapi.Mount, error) {
	if covered[etcHostsPath] {
		return nil, nil
	}
	path := m.etcHostsFile(pod)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("checking /etc/hosts of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: path}, nil
}
