package podspec

import (
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MasterServiceName is the Service of the API server in the default
// namespace; its variables (KUBERNETES_SERVICE_HOST, ...) are given to every
// container, whatever enableServiceLinks says.
const MasterServiceName = "kubernetes"

// ServiceEnv computes the service variables of a container of a pod in
// namespace, the kubelet's Docker-link environment: for every Service with a
// cluster IP (not empty, not None) it defines <NAME>_SERVICE_HOST,
// <NAME>_SERVICE_PORT (the first port), <NAME>_SERVICE_PORT_<PORTNAME> (named
// ports), <NAME>_PORT (the first port as proto://ip:port) and, per port,
// <NAME>_PORT_<port>_<PROTO> with its _PROTO, _PORT and _ADDR, where NAME is
// the Service's name upper-cased with '-' as '_'.
//
// Which Services count: master, the default/kubernetes Service, always (nil
// when it is not known); the Services of namespace only when
// enableServiceLinks is true, and then a Service of the pod's namespace named
// like the master service replaces it. Services of other namespaces in
// services are ignored. The kubelet walks its Services in map order, so two
// Services whose variable names collide give it either value; here Services
// are taken in name order, master first, and a later one wins.
//
// The result is ContainerOptions.ServiceEnv: variables the container's own
// env does not define are added after it.
func ServiceEnv(namespace string, enableServiceLinks bool, master *v1.Service, services []*v1.Service) map[string]string {
	byName := map[string]*v1.Service{}
	if master != nil && master.Namespace == metav1.NamespaceDefault && master.Name == MasterServiceName && serviceIPSet(master) {
		byName[MasterServiceName] = master
	}
	if enableServiceLinks {
		for _, s := range services {
			if s == nil || s.Namespace != namespace || !serviceIPSet(s) {
				continue
			}
			byName[s.Name] = s
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	// The master service first, so that a same-named variable of a
	// namespace Service wins, then by name for a stable result.
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == MasterServiceName:
			return -1
		case b == MasterServiceName:
			return 1
		}
		return strings.Compare(a, b)
	})
	env := map[string]string{}
	for _, name := range names {
		addServiceVars(env, byName[name])
	}
	return env
}

// serviceIPSet says whether s has a cluster IP a client can connect to.
func serviceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone
}

// serviceVarName turns a Service or port name into a variable name part.
func serviceVarName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

func addServiceVars(env map[string]string, s *v1.Service) {
	if len(s.Spec.Ports) == 0 {
		// API validation requires a port for every Service with a cluster
		// IP; without one there is no address to give.
		return
	}
	prefix := serviceVarName(s.Name)
	ip := s.Spec.ClusterIP
	env[prefix+"_SERVICE_HOST"] = ip
	env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			env[prefix+"_SERVICE_PORT_"+serviceVarName(p.Name)] = strconv.Itoa(int(p.Port))
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(v1.ProtocolTCP)
		}
		lower := strings.ToLower(proto)
		port := strconv.Itoa(int(p.Port))
		url := lower + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			env[prefix+"_PORT"] = url
		}
		pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		env[pp] = url
		env[pp+"_PROTO"] = lower
		env[pp+"_PORT"] = port
		env[pp+"_ADDR"] = ip
	}
}
