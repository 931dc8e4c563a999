package deviceplugin

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The node suite's "POD Resources API" specs (test/e2e_node/podresources_test.go)
// that need neither SR-IOV devices nor the CPU or topology managers'
// static policies (which the cluster's agents are not configured with):
// the same names, steps and assertions.
var _ = Describe("[sig-node] POD Resources API [Serial] [Feature:PodResourcesAPI]", func() {
	f := newFramework("podresources-test")
	addBeforeEachForCleaningUpPods(f)

	Context("without SRIOV devices in the system [Flaky]", func() {
		BeforeEach(requireLackOfSRIOVDevices)

		Context("with CPU manager None policy", func() {
			It("should return the expected responses", func(ctx context.Context) {
				waitForPodResourcesV1Serving(ctx)

				cli, conn, err := getV1Client()
				Expect(err).NotTo(HaveOccurred(), "GetV1Client() failed err: %v", err)
				defer func() {
					Expect(conn.Close()).To(Succeed())
				}()

				// No exclusive CPUs with the none policy, and no devices.
				podresourcesGetAllocatableResourcesTests(ctx, cli)
			})
		})
	})

	Context("when querying /metrics [NodeConformance]", func() {
		BeforeEach(func(ctx context.Context) {
			// Every endpoint is called at least once.
			cli, conn, err := getV1Client()
			Expect(err).NotTo(HaveOccurred(), "GetV1Client() failed err %v", err)
			defer func() {
				Expect(conn.Close()).To(Succeed())
			}()

			_, err = cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
			Expect(err).NotTo(HaveOccurred(), "List() failed err %v", err)

			_, err = cli.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
			Expect(err).NotTo(HaveOccurred(), "GetAllocatableResources() failed err %v", err)

			desc := podDesc{podName: "pod-01", cntName: "cnt-01"}
			tpd := newTestPodData()
			tpd.createPodsForTest(ctx, f, []podDesc{desc})
			expectPodResources(ctx, cli, []podDesc{desc})

			expected := []podDesc{}
			resp := podresourcesGetWithRetry(ctx, cli, f.Namespace.Name, "pod-01")
			res := convertToMap([]*podresourcesv1.PodResources{resp.GetPodResources()})
			Expect(matchPodDescWithResources(expected, res)).To(Succeed())
			tpd.deletePodsForTest(ctx, f)
		})

		It("should report the values for the podresources metrics", func(ctx context.Context) {
			By("Checking the value of the podresources metrics")
			matchResourceMetrics := And(
				haveOneSampleAtLeast("kubelet_pod_resources_endpoint_requests_total", 1),
				haveOneSampleAtLeast("kubelet_pod_resources_endpoint_requests_list", 1),
				haveOneSampleAtLeast("kubelet_pod_resources_endpoint_requests_get_allocatable", 1),
				haveOneSampleAtLeast("kubelet_pod_resources_endpoint_requests_get", 1),
			)

			By("Giving the Kubelet time to start up and produce metrics")
			Eventually(ctx, getPodResourcesMetrics, time.Minute, 15*time.Second).Should(matchResourceMetrics)
			By("Ensuring the metrics match the expectations a few more times")
			Consistently(ctx, getPodResourcesMetrics, time.Minute, 15*time.Second).Should(matchResourceMetrics)
		})
	})

	Context("with the builtin rate limit values [Flaky]", func() {
		It("should hit throttling when calling podresources List in a tight loop", func(ctx context.Context) {
			By("Connecting to the kubelet endpoint")
			cli, conn, err := getV1Client()
			Expect(err).NotTo(HaveOccurred(), "GetV1Client() failed err %v", err)
			defer func() {
				Expect(conn.Close()).To(Succeed())
			}()

			tries := podResourcesDefaultQPS * 2 // more than the burst too
			errs := []error{}

			By(fmt.Sprintf("Issuing %d List() calls in a tight loop", tries))
			startTime := time.Now()
			for range tries {
				_, err = cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
				errs = append(errs, err)
			}
			elapsed := time.Since(startTime)

			By(fmt.Sprintf("Checking return codes for %d List() calls in %v", tries, elapsed))
			Expect(errs[0]).NotTo(HaveOccurred(), "the first List() call unexpectedly failed with %v", errs[0])
			// At least one call past the burst is refused.
			errLimitExceededCount := 0
			for _, err := range errs[1:] {
				if isLimitExceeded(err) {
					errLimitExceededCount++
				}
			}
			Expect(errLimitExceededCount).NotTo(BeZero(), "never hit the rate limit trying %d calls in %v", tries, elapsed)
			GinkgoWriter.Printf("got %d/%d rate limit errors, at least one needed, the more the better\n", errLimitExceededCount, tries)

			By("Cooling down to reset the podresources API rate limit")
			time.Sleep(5 * time.Second)
		})
	})
})

// podResourcesDefaultQPS is the kubelet's limit of pod resources calls a
// second.
const podResourcesDefaultQPS = 100

// isLimitExceeded reports whether err is the kubelet's rate limit error.
func isLimitExceeded(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.ResourceExhausted && s.Message() == "rejected by rate limit"
}

// addBeforeEachForCleaningUpPods deletes the pods left in the spec's
// namespace before each spec.
func addBeforeEachForCleaningUpPods(f *framework) {
	BeforeEach(func(ctx context.Context) {
		By("Deleting any Pods created by previous test(s) in all namespaces")
		for _, p := range f.listPods(ctx) {
			GinkgoWriter.Printf("Deleting pod: %s in %s\n", p.Name, p.Namespace)
			f.deleteSync(ctx, p.Name, metav1.DeleteOptions{}, podDeleteTimeout)
		}
	})
}

// requireLackOfSRIOVDevices skips a spec on a machine with SR-IOV virtual
// functions.
func requireLackOfSRIOVDevices() {
	vfs, err := filepath.Glob("/sys/bus/pci/devices/*/physfn")
	if err != nil || len(vfs) > 0 {
		Skip("this test is meant to run on a system with no configured VF from SRIOV device")
	}
}

// waitForPodResourcesV1Serving waits for the v1 List to answer.
func waitForPodResourcesV1Serving(ctx context.Context) {
	GinkgoHelper()
	var lastErr error
	Eventually(func() error {
		cli, conn, err := getV1Client()
		if err != nil {
			lastErr = err
			return err
		}
		defer conn.Close()
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, lastErr = cli.List(reqCtx, &podresourcesv1.ListPodResourcesRequest{})
		return lastErr
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "PodResources endpoint did not become ready (last err: %v)", lastErr)
}

// podresourcesGetAllocatableResourcesTests checks GetAllocatableResources
// as the node suite does with the none policy and no devices in the
// environment: it answers, and with no devices.
func podresourcesGetAllocatableResourcesTests(ctx context.Context, cli podresourcesv1.PodResourcesListerClient) {
	GinkgoHelper()
	By("checking the devices known to the kubelet")
	resp, err := cli.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	Expect(err).NotTo(HaveOccurred(), "cannot get allocatable CPUs from podresources")

	// The node suite passes no online CPUs for the none policy, where its
	// CPU check (online CPUs less reserved ones) has nothing to compare.
	By("expecting no CPUs reported")
	GinkgoWriter.Printf("allocatable CPUs: %v\n", resp.GetCpuIds())

	By("expecting no devices reported")
	Expect(resp.GetDevices()).To(BeEmpty(), fmt.Sprintf("got unexpected devices %#v", resp.GetDevices()))
}

// podDesc describes a pod of the pod resources specs: one container
// requesting nothing, or resourceAmount of resourceName.
type podDesc struct {
	podName        string
	cntName        string
	resourceName   string
	resourceAmount int
}

func (d podDesc) requiresDevices() bool {
	return d.resourceName != "" && d.resourceAmount > 0
}

// makePodResourcesTestPod is a pod of desc that sleeps a day and is never
// restarted.
func makePodResourcesTestPod(desc podDesc) *corev1.Pod {
	cnt := corev1.Container{
		Name:      desc.cntName,
		Image:     busyboxImage,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}},
		Command:   []string{"sh", "-c", "sleep 1d"},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: desc.podName},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{cnt},
		},
	}
}

// testPodData holds the pods a spec created, by name.
type testPodData struct {
	PodMap map[string]*corev1.Pod
}

func newTestPodData() *testPodData {
	return &testPodData{PodMap: map[string]*corev1.Pod{}}
}

func (tpd *testPodData) createPodsForTest(ctx context.Context, f *framework, podReqs []podDesc) {
	GinkgoHelper()
	for _, podReq := range podReqs {
		pod := f.createSync(ctx, makePodResourcesTestPod(podReq))
		GinkgoWriter.Printf("created pod %s\n", podReq.podName)
		tpd.PodMap[podReq.podName] = pod
	}
}

// deletePodsForTest deletes the pods at once and waits until the runtime
// has none of their containers left.
func (tpd *testPodData) deletePodsForTest(ctx context.Context, f *framework) {
	GinkgoHelper()
	for _, pod := range tpd.PodMap {
		GinkgoWriter.Printf("deleting pod: %s/%s\n", pod.Namespace, pod.Name)
		f.deletePodSyncByName(ctx, pod.Name)
		waitForAllContainerRemoval(ctx, pod.Name, pod.Namespace)
	}
}

// podResMap is the pod resources by pod name and container name.
type podResMap map[string]map[string]*podresourcesv1.ContainerResources

func convertToMap(podsResources []*podresourcesv1.PodResources) podResMap {
	res := podResMap{}
	for _, podResource := range podsResources {
		cnts := map[string]*podresourcesv1.ContainerResources{}
		for _, cnt := range podResource.GetContainers() {
			cnts[cnt.GetName()] = cnt
		}
		res[podResource.GetName()] = cnts
	}
	return res
}

// matchPodDescWithResources checks that every expected pod's container is
// listed with the devices it asked for, or none.
func matchPodDescWithResources(expected []podDesc, found podResMap) error {
	for _, podReq := range expected {
		podInfo, ok := found[podReq.podName]
		if !ok {
			return fmt.Errorf("no pod resources for pod %q", podReq.podName)
		}
		cntInfo, ok := podInfo[podReq.cntName]
		if !ok {
			return fmt.Errorf("no container resources for pod %q container %q", podReq.podName, podReq.cntName)
		}
		if podReq.requiresDevices() {
			var dev *podresourcesv1.ContainerDevices
			for _, d := range cntInfo.GetDevices() {
				if d.ResourceName == podReq.resourceName {
					dev = d
				}
			}
			if dev == nil {
				return fmt.Errorf("pod %q container %q expected data for resource %q not found", podReq.podName, podReq.cntName, podReq.resourceName)
			}
			if len(dev.DeviceIds) != podReq.resourceAmount {
				return fmt.Errorf("pod %q container %q resource %q expected %d items got %v", podReq.podName, podReq.cntName, podReq.resourceName, podReq.resourceAmount, dev.DeviceIds)
			}
		} else if devs := cntInfo.GetDevices(); len(devs) > 0 {
			return fmt.Errorf("pod %q container %q expected no resources, got %v", podReq.podName, podReq.cntName, devs)
		}
	}
	return nil
}

// expectPodResources waits for List to show the expected pods.
func expectPodResources(ctx context.Context, cli podresourcesv1.PodResourcesListerClient, expected []podDesc) {
	GinkgoHelper()
	Eventually(ctx, func(ctx context.Context) error {
		resp, err := cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			return err
		}
		return matchPodDescWithResources(expected, convertToMap(resp.GetPodResources()))
	}, time.Minute, 10*time.Second).Should(Succeed())
}

// podresourcesGetWithRetry calls Get until it answers.
func podresourcesGetWithRetry(ctx context.Context, cli podresourcesv1.PodResourcesListerClient, podNamespace, podName string) *podresourcesv1.GetPodResourcesResponse {
	GinkgoHelper()
	var resp *podresourcesv1.GetPodResourcesResponse
	Eventually(func() error {
		var err error
		resp, err = cli.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: podName, PodNamespace: podNamespace})
		GinkgoWriter.Printf("Get result: %v, err: %v\n", resp, err)
		return err
	}).WithContext(ctx).WithPolling(2*time.Second).WithTimeout(30*time.Second).Should(Succeed(), "Expected Get to succeed for %s/%s", podNamespace, podName)
	return resp
}

// getPodResourcesMetrics reads the agent's /metrics through the API
// server's node proxy (the node suite reads the read-only port, which
// neither agent opens here).
func getPodResourcesMetrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	By("getting Pod Resources metrics from the metrics API")
	data, err := clientSet.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/nodes", env.NodeName, "proxy", "metrics").
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting the node's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parsing the node's metrics: %w", err)
	}
	return families, nil
}

// haveOneSampleAtLeast matches metric families where name has exactly one
// sample (the node suite matches all of its samples by one ID) whose value
// is at least lower.
func haveOneSampleAtLeast(name string, lower float64) OmegaMatcher {
	return WithTransform(func(families map[string]*dto.MetricFamily) ([]float64, error) {
		fam, ok := families[name]
		if !ok {
			return nil, fmt.Errorf("no metric %s", name)
		}
		var values []float64
		for _, m := range fam.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				values = append(values, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				values = append(values, m.GetGauge().GetValue())
			case m.GetUntyped() != nil:
				values = append(values, m.GetUntyped().GetValue())
			}
		}
		return values, nil
	}, And(HaveLen(1), HaveEach(BeNumerically(">=", lower))))
}
