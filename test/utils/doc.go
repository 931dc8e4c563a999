// Package utils is the harness of the integration and e2e tests: it runs the
// real things a node agent talks to, each private to one test run so that
// several runs can share a machine.
//
//   - StartContainerd runs a containerd of its own (root, state, socket, CNI
//     bridge and subnet under a temporary directory) with the CRI plugin
//     configured for this machine kind, and imports the test images.
//   - PauseImage and BusyboxImage are built locally, without Docker (with
//     the imagebuild package, which the conformance images and hack/image
//     use too), and cached by content under
//     ${NODELET_CACHE:-${XDG_CACHE_HOME:-~/.cache}/nodelet}/images.
//   - StartRegistry runs a docker-registry on loopback with htpasswd auth,
//     and Registry.Push copies a test image into it.
//   - StartAPIServer runs an envtest kube-apiserver and etcd configured like a
//     real cluster's for a node agent (Node authorizer, NodeRestriction), and
//     APIServer.NodeUserConfig gives a client that authenticates as a node.
//     It also reaches node agents as a real one does: it presents a client
//     certificate (--kubelet-client-certificate/-key, user
//     kube-apiserver-kubelet-client in system:masters) signed by
//     APIServer.KubeletClientCA, and dials a Node's InternalIP first
//     (--kubelet-preferred-address-types=InternalIP,Hostname). So kubectl
//     logs, exec, port-forward and get --raw .../proxy/... work through it;
//     APIServer.Kubectl runs the envtest-built kubectl as the admin, and
//     KubeletClientCA.TLSClientCert signs other callers of a node API.
//     Client certificates are signed by APIServer.ClientCA, whose key is
//     on disk; StartAPIServerWithOptions adds bootstrap token
//     authentication.
//   - StartControllerManager and StartScheduler run the envtest-built
//     kube-controller-manager (every controller plus bootstrapsigner and
//     tokencleaner, CSRs signed with APIServer.ClientCA) and kube-scheduler
//     against an APIServer; SetUpTLSBootstrap creates a bootstrap token,
//     its kubeconfig and the bindings that let a node join with it (any
//     node name, as kubeadm's bindings do, for make run's cluster);
//     CreateNodeBootstrapToken makes a per-host token bound to one node
//     name with hack/bootstrap-token.sh, and InstallNodeletAccess and
//     StartCSRApprover install config/'s RBAC and run `nodelet
//     csr-approver` as its own ServiceAccount
//     (StartCSRApproverWithOptions: with the serving names it may approve).
//   - StartNodelet runs the nodelet binary built from this repository as
//     system:node:<name> (or, with NodeletOptions.BootstrapKubeconfig,
//     with only a bootstrap token), with its own free ports for health, metrics and
//     the node API, and KubeletClientCA as its server.clientCAFile. Its
//     nodeIP, where the node API listens (Nodelet.ServerAddr), is the
//     host's address on its containerd's pod bridge (Containerd.HostIP):
//     the API server refuses to proxy to a loopback node address.
//   - StartKubelet runs a real kubelet (built from the pinned module by
//     hack/kubelet.sh, or a given binary) as system:node:<name> on a
//     containerd of the harness, with the settings this machine kind needs
//     and the caller's configuration keys and flags; WaitHealthy and
//     Supervise make it the conformance suite's reference node. SharedDir
//     makes a shared mount point for host paths a pod mounts Bidirectional.
//   - WebImage is a small HTTP server of ours (test/images/web) that runs
//     without a command, for Deployments on make run's local cluster.
//   - StartCluster runs n nodes on one machine: a NodeNetwork (host bridge
//     nlnet<N> with 10.251.N.1/24, per node a network namespace joined by a
//     veth, eth0 10.251.N.(10+i)), the API server serving on the bridge
//     address (APIServerOptions.BindAddress), a controller-manager
//     allocating pod subnets from its own /19 of 10.244.0.0/14, and per node a containerd
//     and a nodelet in the namespace (ContainerdOptions.NetNS,
//     NodeletOptions.NetNS). It routes each node's spec.podCIDR on the host
//     and in the other nodes; StopNode/StartNode stop and start a node's
//     nodelet; CleanupNodeNetworks removes what a killed run left.
//   - After a process that started these was killed, TeardownContainerdDir,
//     KillProcessesUnder, UnmountUnder and APIServer.Dirs clean up knowing
//     only the directories it recorded (make run-down).
//
// Every Start has a Stop that is idempotent and leaves no process, mount,
// bridge or directory behind. Missing Debian packages are installed with
// hack/install-deps.sh and missing envtest binaries are built with
// hack/envtest.sh. Functions return errors; the Must* helpers assert with
// Gomega and register their cleanup with Ginkgo.
package utils
