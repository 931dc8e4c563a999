package podspec

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ResolvePort returns the port a probe or lifecycle hook names: a number,
// the name of one of the container's ports, or a number written as a
// string, as the kubelet resolves them. The result is a valid TCP port.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		if c != nil {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					port = int(cp.ContainerPort)
					break
				}
			}
		}
		if port < 0 {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				name := ""
				if c != nil {
					name = c.Name
				}
				return 0, fmt.Errorf("container %s has no port named %q", name, p.StrVal)
			}
			port = n
		}
	}
	if port <= 0 || port > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", port)
	}
	return port, nil
}
