package app

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/cgroups"
)

const (
	// kubeletPodResourcesSocket is where a kubelet with its default root
	// directory serves its pod-resources API: it answers while the kubelet
	// runs, and refuses connections once it stopped.
	kubeletPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	// kubeletPodLogsDir is the kubelet's podLogsDir.
	kubeletPodLogsDir = "/var/log/pods"
	// kubeletDialTimeout bounds the connection to the kubelet's socket.
	kubeletDialTimeout = time.Second
)

// kubeletPaths lists the settings of cfg whose paths are those a kubelet
// on the same host uses with its defaults (which are nodelet's too): the
// pod log directory and, with cgroupsPerQOS, the kubepods cgroup under the
// root cgroup. A kubelet removes what it finds there of pods it does not
// run: nodelet's pods' logs, and nodelet's pods' cgroups with what runs in
// them; and both agents would set kubepods' QoS bounds, each from its own
// pods. The list is empty when nothing is shared.
func kubeletPaths(cfg *v1alpha1.NodeletConfiguration) []string {
	var shared []string
	if filepath.Clean(cfg.PodLogsDir) == kubeletPodLogsDir {
		shared = append(shared, fmt.Sprintf("podLogsDir %q", cfg.PodLogsDir))
	}
	if cfg.CgroupsPerQOS == nil || *cfg.CgroupsPerQOS {
		root, err := cgroups.Driver(cfg.CgroupDriver).Parse(cfg.CgroupRoot)
		if err == nil && len(root) == 0 {
			shared = append(shared, fmt.Sprintf("cgroupRoot %q (its kubepods cgroup is %s)", cfg.CgroupRoot,
				cgroups.Driver(cfg.CgroupDriver).Name(root.Child(cgroups.KubepodsName))))
		}
	}
	return shared
}

// kubeletRunning reports whether a kubelet runs on the host whose root
// filesystem is at hostRoot: its pod-resources socket accepts a
// connection. It returns the socket's path.
func kubeletRunning(hostRoot string) (string, bool) {
	sock := filepath.Join(hostRoot, kubeletPodResourcesSocket)
	conn, err := net.DialTimeout("unix", sock, kubeletDialTimeout)
	if err != nil {
		return sock, false
	}
	_ = conn.Close()
	return sock, true
}

// checkKubeletPaths refuses to run pods in a kubelet's paths while a
// kubelet runs on the host (see kubeletPaths): each agent would destroy
// the other's pods' logs or cgroups. nodelet itself removes only what it
// made, but a kubelet does not.
func checkKubeletPaths(cfg *v1alpha1.NodeletConfiguration) error {
	shared := kubeletPaths(cfg)
	if len(shared) == 0 {
		return nil
	}
	root := cfg.HostRoot
	if root == "" {
		root = "/"
	}
	sock, running := kubeletRunning(root)
	if !running {
		return nil
	}
	return errors.New("a kubelet runs on this host (" + sock + " answers) and would remove what nodelet's pods keep in its paths: " +
		strings.Join(shared, ", ") + "; give nodelet paths of its own (podLogsDir, cgroupRoot)")
}
