package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// The node suite's timeouts (the e2e framework's defaults).
const (
	// poll is how often the specs look again (framework.Poll).
	poll = 2 * time.Second
	// podStartTimeout bounds a pod's start (framework.PodStartTimeout).
	podStartTimeout = 5 * time.Minute
	// podDeleteTimeout bounds a pod's deletion (f.Timeouts.PodDelete).
	podDeleteTimeout = 5 * time.Minute
	// namespaceDeleteTimeout bounds a spec namespace's deletion.
	namespaceDeleteTimeout = 5 * time.Minute
	// podReadyPoll is how often a wait for a pod's readiness looks: more
	// often than poll, so that a pod that is ready for a few seconds
	// before it completes is seen ready.
	podReadyPoll = 500 * time.Millisecond
)

// The images the specs run (the names of the node suite's; the harness
// builds them).
const (
	busyboxImage            = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	sampleDevicePluginImage = "registry.k8s.io/e2e-test-images/sample-device-plugin:1.8.0"
)

// framework is the part of the e2e framework the specs use: a namespace
// per spec, created before it (with the default service account the
// pods need) and deleted after it, and a pod client bound to it that runs
// pods on the node under test, as the node suite's pod client does.
type framework struct {
	baseName  string
	Namespace *corev1.Namespace
}

// newFramework registers the namespace's BeforeEach in the enclosing
// container.
func newFramework(baseName string) *framework {
	f := &framework{baseName: baseName}
	BeforeEach(f.createNamespace)
	return f
}

func (f *framework) createNamespace(ctx context.Context) {
	ns, err := clientSet.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: f.baseName + "-",
			Labels: map[string]string{
				"e2e-framework": f.baseName,
				// The specs' pods are privileged (the device plugin).
				"pod-security.kubernetes.io/enforce": "privileged",
				"pod-security.kubernetes.io/warn":    "privileged",
				"pod-security.kubernetes.io/audit":   "privileged",
			},
		},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "creating the spec's namespace")
	f.Namespace = ns
	DeferCleanup(f.deleteNamespace)
	Eventually(ctx, func(ctx context.Context) error {
		_, err := clientSet.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "the default service account of %s", ns.Name)
}

func (f *framework) deleteNamespace(ctx context.Context) {
	name := f.Namespace.Name
	err := clientSet.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred(), "deleting namespace %s", name)
	Eventually(ctx, func(ctx context.Context) bool {
		_, err := clientSet.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(namespaceDeleteTimeout).WithPolling(poll).Should(BeTrue(), "namespace %s deleted", name)
}

// mungeSpec puts a pod on the node under test with the node's DNS, as the
// node suite's pod client does.
func (f *framework) mungeSpec(pod *corev1.Pod) {
	GinkgoHelper()
	Expect(pod.Spec.NodeName).To(Or(BeZero(), Equal(env.NodeName)), "pod %s asks for another node", pod.Name)
	pod.Namespace = f.Namespace.Name
	pod.Spec.NodeName = env.NodeName
	pod.Spec.DNSPolicy = corev1.DNSDefault
}

// create creates pod in the spec's namespace on the node.
func (f *framework) create(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	pod = pod.DeepCopy()
	f.mungeSpec(pod)
	created, err := clientSet.CoreV1().Pods(f.Namespace.Name).Create(ctx, pod, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "creating pod %s", pod.Name)
	return created
}

// createSync creates pod and waits until it runs and is ready.
func (f *framework) createSync(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	p := f.create(ctx, pod)
	Expect(waitForPodReady(ctx, f.Namespace.Name, p.Name, podStartTimeout)).To(Succeed())
	p, err := f.get(ctx, p.Name)
	Expect(err).NotTo(HaveOccurred())
	return p
}

func (f *framework) get(ctx context.Context, name string) (*corev1.Pod, error) {
	return clientSet.CoreV1().Pods(f.Namespace.Name).Get(ctx, name, metav1.GetOptions{})
}

// deleteSync deletes the pod and waits until it is gone from the API.
func (f *framework) deleteSync(ctx context.Context, name string, opts metav1.DeleteOptions, timeout time.Duration) {
	GinkgoHelper()
	err := clientSet.CoreV1().Pods(f.Namespace.Name).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		Fail(fmt.Sprintf("Failed to delete pod %q: %v", name, err))
	}
	Expect(waitForPodNotFound(ctx, f.Namespace.Name, name, timeout)).To(Succeed(), "wait for pod %q to disappear", name)
}

// deletePodSyncByName deletes the pod at once (grace period 0).
func (f *framework) deletePodSyncByName(ctx context.Context, name string) {
	GinkgoHelper()
	gp := int64(0)
	f.deleteSync(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &gp}, podDeleteTimeout)
}

// removeFinalizer removes finalizer from the pod's finalizers.
func (f *framework) removeFinalizer(ctx context.Context, name, finalizer string) {
	GinkgoHelper()
	GinkgoWriter.Printf("Removing pod's %q finalizer: %q\n", name, finalizer)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := f.get(ctx, name)
		if err != nil {
			return err
		}
		var kept []string
		for _, fin := range pod.Finalizers {
			if fin != finalizer {
				kept = append(kept, fin)
			}
		}
		pod.Finalizers = kept
		_, err = clientSet.CoreV1().Pods(f.Namespace.Name).Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred(), "removing finalizer %s of pod %s", finalizer, name)
}

// listPods lists the pods of the spec's namespace.
func (f *framework) listPods(ctx context.Context) []corev1.Pod {
	GinkgoHelper()
	l, err := clientSet.CoreV1().Pods(f.Namespace.Name).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	return l.Items
}

// podLogs returns a container's log.
func podLogs(ctx context.Context, namespace, pod, container string) (string, error) {
	data, err := clientSet.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Do(ctx).Raw()
	if err != nil {
		return "", fmt.Errorf("getting the log of %s/%s/%s: %w", namespace, pod, container, err)
	}
	return string(data), nil
}

// podReady reports whether the pod's Ready condition is true.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitForPod polls the pod until done says it is done; an error from
// done ends the wait at once.
func waitForPod(ctx context.Context, namespace, name, what string, timeout, interval time.Duration, done func(*corev1.Pod) (bool, error)) error {
	var last *corev1.Pod
	var lastErr error
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		pod, err := clientSet.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = pod
			ok, derr := done(pod)
			if derr != nil {
				return fmt.Errorf("waiting for pod %s/%s to be %s: %w", namespace, name, what, derr)
			}
			if ok {
				return nil
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			state := "never seen"
			if last != nil {
				state = fmt.Sprintf("phase %s, reason %q, message %q, ready %v", last.Status.Phase, last.Status.Reason, last.Status.Message, podReady(last))
			}
			return fmt.Errorf("timed out after %s waiting for pod %s/%s to be %s (%s; last error: %w)", timeout, namespace, name, what, state, lastErr)
		case <-time.After(interval):
		}
	}
}

// waitForPodReady waits for the pod to run and be ready; a pod that
// completes or fails first is an error.
func waitForPodReady(ctx context.Context, namespace, name string, timeout time.Duration) error {
	return waitForPod(ctx, namespace, name, "running and ready", timeout, podReadyPoll, func(pod *corev1.Pod) (bool, error) {
		switch pod.Status.Phase {
		case corev1.PodFailed:
			return false, fmt.Errorf("pod failed: reason %q, message %q", pod.Status.Reason, pod.Status.Message)
		case corev1.PodSucceeded:
			return false, errors.New("pod ran to completion")
		case corev1.PodRunning:
			return podReady(pod), nil
		}
		return false, nil
	})
}

// waitForPodRunning waits for the pod's phase to be Running.
func waitForPodRunning(ctx context.Context, namespace, name string, timeout time.Duration) error {
	return waitForPod(ctx, namespace, name, "running", timeout, poll, func(pod *corev1.Pod) (bool, error) {
		switch pod.Status.Phase {
		case corev1.PodFailed, corev1.PodSucceeded:
			return false, fmt.Errorf("pod is %s: reason %q, message %q", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
		}
		return pod.Status.Phase == corev1.PodRunning, nil
	})
}

// waitForPodSuccess waits for the pod to succeed; a failed pod is an error.
func waitForPodSuccess(ctx context.Context, namespace, name string) error {
	return waitForPod(ctx, namespace, name, "Succeeded", podStartTimeout, poll, func(pod *corev1.Pod) (bool, error) {
		if pod.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod failed: reason %q, message %q", pod.Status.Reason, pod.Status.Message)
		}
		return pod.Status.Phase == corev1.PodSucceeded, nil
	})
}

// waitForPodNotFound waits until the pod is gone from the API.
func waitForPodNotFound(ctx context.Context, namespace, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := clientSet.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for pod %s/%s to be gone (last error: %w)", timeout, namespace, name, err)
		case <-time.After(poll):
		}
	}
}

// checkMirrorPodDisappear says why the pod still exists, or nil.
func checkMirrorPodDisappear(ctx context.Context, name, namespace string) error {
	_, err := clientSet.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("mirror pod %v/%v still exists", namespace, name)
	}
	return fmt.Errorf("expect mirror pod %v/%v to not exist but got error: %w", namespace, name, err)
}

// The node under test.

// nodeReady reports whether the node's Ready condition is true.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeSchedulable is e2enode.IsNodeSchedulable: ready and not cordoned.
func nodeSchedulable(node *corev1.Node) bool {
	return nodeReady(node) && !node.Spec.Unschedulable
}

// nodeUntainted reports whether the node has no taint that keeps pods off.
func nodeUntainted(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}

// getLocalTestNode returns the node under test and whether it is ready
// and schedulable.
func getLocalTestNode(ctx context.Context) (*corev1.Node, bool) {
	GinkgoHelper()
	node, err := clientSet.CoreV1().Nodes().Get(ctx, env.NodeName, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	ready, schedulable := nodeReady(node), nodeSchedulable(node)
	GinkgoWriter.Printf("node %q ready=%v schedulable=%v\n", node.Name, ready, schedulable)
	return node, ready && schedulable
}

// getLocalNode returns the one ready and schedulable node.
func getLocalNode(ctx context.Context) *corev1.Node {
	GinkgoHelper()
	nodes, err := clientSet.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var ready []corev1.Node
	for _, n := range nodes.Items {
		if nodeSchedulable(&n) && nodeUntainted(&n) {
			ready = append(ready, n)
		}
	}
	Expect(ready).To(HaveLen(1), "Unexpected number of node objects for node e2e. Expects only one node.")
	return &ready[0]
}

// totalReady counts the ready nodes.
func totalReady(ctx context.Context) (int, error) {
	nodes, err := clientSet.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range nodes.Items {
		if nodeReady(&node) {
			n++
		}
	}
	return n, nil
}

// waitForAllNodesSchedulable waits until every node is ready, not
// cordoned and untainted.
func waitForAllNodesSchedulable(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var why string
	for {
		nodes, err := clientSet.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			why = ""
			for _, n := range nodes.Items {
				if !nodeSchedulable(&n) || !nodeUntainted(&n) {
					why = fmt.Sprintf("node %s: ready %v, unschedulable %v, taints %v", n.Name, nodeReady(&n), n.Spec.Unschedulable, n.Spec.Taints)
				}
			}
			if why == "" {
				return nil
			}
		} else {
			why = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for all nodes to be schedulable: %s", timeout, why)
		case <-time.After(poll):
		}
	}
}

// The sample device plugin's resource.
const (
	sampleDeviceResourceName = "example.com/resource"
	// sampleDevsAmount is how many devices the sample device plugin has.
	sampleDevsAmount int64 = 2
)

func countSampleDeviceCapacity(node *corev1.Node) int64 {
	val, ok := node.Status.Capacity[corev1.ResourceName(sampleDeviceResourceName)]
	if !ok {
		return 0
	}
	return val.Value()
}

func countSampleDeviceAllocatable(node *corev1.Node) int64 {
	val, ok := node.Status.Allocatable[corev1.ResourceName(sampleDeviceResourceName)]
	if !ok {
		return 0
	}
	return val.Value()
}

// The node agent's pod resources API.

const (
	podResourcesTimeout = 10 * time.Second
	podResourcesMaxSize = 1024 * 1024 * 16
)

// podResourcesConn dials the agent's pod resources socket.
func podResourcesConn() (*grpc.ClientConn, error) {
	socket := filepath.Join(env.RootDir, "pod-resources", "kubelet.sock")
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(podResourcesMaxSize)))
	if err != nil {
		return nil, fmt.Errorf("dialing the pod resources API at %s: %w", socket, err)
	}
	return conn, nil
}

// getV1Client returns a v1 pod resources client and its connection.
func getV1Client() (podresourcesv1.PodResourcesListerClient, *grpc.ClientConn, error) {
	conn, err := podResourcesConn()
	if err != nil {
		return nil, nil, err
	}
	return podresourcesv1.NewPodResourcesListerClient(conn), conn, nil
}

func getV1NodeDevices(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error) {
	cli, conn, err := getV1Client()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	resp, err := cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("v1 List: %w", err)
	}
	return resp, nil
}

func getV1alpha1NodeDevices(ctx context.Context) (*podresourcesv1alpha1.ListPodResourcesResponse, error) {
	conn, err := podResourcesConn()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	resp, err := podresourcesv1alpha1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1alpha1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("v1alpha1 List: %w", err)
	}
	return resp, nil
}

// waiveV1alpha1Env, set to 1, waives the specs' v1alpha1 pod resources
// checks on an agent that serves only v1 (the check before every device
// plugin spec would otherwise fail them all): a diagnostic run that shows
// what else the specs find, never the table of record.
const waiveV1alpha1Env = "DEVICEPLUGIN_WAIVE_V1ALPHA1"

// v1alpha1Waived reports whether a v1alpha1 check that failed with err is
// waived (and says so in the spec's log).
func v1alpha1Waived(err error) bool {
	if os.Getenv(waiveV1alpha1Env) != "1" || status.Code(err) != codes.Unimplemented {
		return false
	}
	GinkgoWriter.Printf("WAIVED (%s=1): %v\n", waiveV1alpha1Env, err)
	return true
}

// stopIfUnimplemented ends a poll of the pod resources API that the agent
// does not serve at all: waiting cannot change that.
func stopIfUnimplemented(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return StopTrying("the node agent does not serve this pod resources API").Wrap(err)
	}
	return err
}

// The node's runtime.

// runtimeClient dials the node's CRI.
func runtimeClient() (runtimeapi.RuntimeServiceClient, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient(env.RuntimeEndpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("dialing the runtime at %s: %w", env.RuntimeEndpoint, err)
	}
	return runtimeapi.NewRuntimeServiceClient(conn), conn, nil
}

// podContainers lists the runtime's containers with the labels.
func podContainers(ctx context.Context, labels map[string]string) ([]*runtimeapi.Container, error) {
	rs, conn, err := runtimeClient()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: labels}})
	if err != nil {
		return nil, err
	}
	return resp.Containers, nil
}

// waitForAllContainerRemoval waits until the runtime has no container of
// the pod left.
func waitForAllContainerRemoval(ctx context.Context, podName, podNS string) {
	GinkgoHelper()
	Eventually(ctx, func(ctx context.Context) error {
		containers, err := podContainers(ctx, map[string]string{
			kubelettypes.KubernetesPodNameLabel:      podName,
			kubelettypes.KubernetesPodNamespaceLabel: podNS,
		})
		if err != nil {
			return fmt.Errorf("got error waiting for all containers to be removed from CRI: %w", err)
		}
		if len(containers) > 0 {
			return fmt.Errorf("expected all containers to be removed from CRI but %v containers still remain. Containers: %+v", len(containers), containers)
		}
		return nil
	}, 2*time.Minute, time.Second).Should(Succeed())
}

// waitForContainerRemoval waits until the runtime has no container of that
// name in the pod.
func waitForContainerRemoval(ctx context.Context, containerName, podName, podNS string) {
	GinkgoHelper()
	Eventually(ctx, func(ctx context.Context) bool {
		containers, err := podContainers(ctx, map[string]string{
			kubelettypes.KubernetesPodNameLabel:       podName,
			kubelettypes.KubernetesPodNamespaceLabel:  podNS,
			kubelettypes.KubernetesContainerNameLabel: containerName,
		})
		return err == nil && len(containers) == 0
	}, 2*time.Minute, time.Second).Should(BeTrue(), "Containers were expected to be removed")
}

// The node agent, which the harness owns: the node suite's systemctl.

// agentControl asks the harness to stop, start or restart the agent.
func agentControl(ctx context.Context, what string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.AgentControl+"/"+what, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking the harness to %s %s: %w", what, env.Agent, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("asking the harness to %s %s: %s: %s", what, env.Agent, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// restartKubelet restarts the node agent (stop, then start).
func restartKubelet(ctx context.Context) {
	GinkgoHelper()
	Expect(agentControl(ctx, "restart")).To(Succeed(), "Failed to restart the node agent")
}

// mustStopKubelet stops the node agent, waits for its health check to
// fail, and returns a function that starts it again and waits for it and
// its node to be ready.
func mustStopKubelet(ctx context.Context) func(context.Context) {
	GinkgoHelper()
	Expect(agentControl(ctx, "stop")).To(Succeed(), "Failed to stop the node agent")
	Eventually(ctx, func() bool {
		return healthCheck(env.AgentHealthz)
	}, podStartTimeout, poll).Should(BeFalseBecause("kubelet was expected to be stopped but it is still running"))
	return func(ctx context.Context) {
		GinkgoHelper()
		Expect(agentControl(ctx, "start")).To(Succeed(), "Failed to start the node agent")
		waitForKubeletToStart(ctx)
	}
}

// waitForKubeletToStart waits for the agent's health check and its node.
func waitForKubeletToStart(ctx context.Context) {
	GinkgoHelper()
	Eventually(ctx, func() bool {
		return healthCheck(env.AgentHealthz)
	}, 2*time.Minute, 5*time.Second).Should(BeTrueBecause("expected kubelet to be in healthy state"))
	Eventually(ctx, func(ctx context.Context) error {
		nodes, err := totalReady(ctx)
		if err != nil {
			return fmt.Errorf("error getting ready nodes: %w", err)
		}
		if nodes != 1 {
			return fmt.Errorf("expected 1 ready node, got %d", nodes)
		}
		return nil
	}, time.Minute, time.Second).Should(Succeed())
}

// healthCheck reports whether url answers 200.
func healthCheck(url string) bool {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
