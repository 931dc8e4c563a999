package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

// nodeFailoverTimeout bounds the node lifecycle controller's reaction to a
// stopped node: NotReady after --node-monitor-grace-period (20 s), the
// unreachable taint, the pods' toleration and their replacements.
const nodeFailoverTimeout = 2 * time.Minute

var _ = Describe("Multi-node cluster failover", Ordered, Label(heavyLabel), func() {
	var (
		cluster *utils.Cluster
		admin   client.Client
		ns      string
	)

	BeforeAll(func(ctx SpecContext) {
		if !strings.Contains(GinkgoLabelFilter(), heavyLabel) {
			Skip("a heavy spec: run it with -ginkgo.label-filter=" + heavyLabel)
		}
		ns = "failover"
		cluster, admin = startTestCluster(ctx, 3, fmt.Sprintf("fo%d", GinkgoParallelProcess()), ns)
	}, NodeTimeout(clusterStartTimeout))

	AfterEach(func() { printClusterLogsOnFailure(cluster, 60) })

	It("answers a NodePort Service on every node's address, from the host and from a pod", func(ctx SpecContext) {
		expectNodePortServes(ctx, cluster, admin, ns, "nodeport", cluster.Nodes[0].Name)
	}, SpecTimeout(2*multiNodePodTimeout))

	It("drains a node through the Eviction API, honouring PodDisruptionBudgets, and uncordons it", func(ctx SpecContext) {
		drained := cluster.Nodes[1]
		movable := spreadDeployment(ns, "movable", 3)
		Expect(admin.Create(ctx, movable)).To(Succeed())
		Expect(admin.Create(ctx, pdb(ns, "movable", 2))).To(Succeed())
		// One replica that prefers the drained node, and a budget that
		// allows it no disruption.
		guarded := webDeployment(ns, "guarded", 1)
		guarded.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{drained.Name},
				}}},
			}},
		}}
		Expect(admin.Create(ctx, guarded)).To(Succeed())
		Expect(admin.Create(ctx, pdb(ns, "guarded", 1))).To(Succeed())
		movablePods := waitDeploymentReady(ctx, admin, ns, "movable", 3)
		guardedPods := waitDeploymentReady(ctx, admin, ns, "guarded", 1)
		Expect(guardedPods[0].Spec.NodeName).To(Equal(drained.Name))
		var evicted []string
		for _, p := range movablePods {
			if p.Spec.NodeName == drained.Name {
				evicted = append(evicted, p.Name)
			}
		}
		Expect(evicted).To(HaveLen(1), "the spread Deployment has one pod on %s", drained.Name)
		// The budgets' controller must have counted the pods before an
		// eviction is judged against them.
		Eventually(func(g Gomega) {
			for name, allowed := range map[string]int32{"movable": 1, "guarded": 0} {
				b := &policyv1.PodDisruptionBudget{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b)).To(Succeed())
				g.Expect(b.Status.ObservedGeneration).To(Equal(b.Generation))
				g.Expect(b.Status.DisruptionsAllowed).To(Equal(allowed), "budget %s", name)
			}
		}).WithTimeout(multiNodePodTimeout).Should(Succeed())

		By("draining " + drained.Name + ": the guarded pod's eviction is refused until the timeout")
		out, err := runKubectl(ctx, cluster, "drain", drained.Name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s")
		Expect(err).To(HaveOccurred(), "drain finished although a budget forbids evicting %s:\n%s", guardedPods[0].Name, out)
		Expect(out).To(ContainSubstring("would violate the pod's disruption budget"))
		Expect(out).To(ContainSubstring(guardedPods[0].Name))

		node := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: drained.Name}, node)).To(Succeed())
		Expect(node.Spec.Unschedulable).To(BeTrue())
		// The movable pod left; its replacement runs on another node.
		Eventually(func(g Gomega) {
			pods := deploymentPods(ctx, g, admin, ns, "movable")
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				g.Expect(evicted).NotTo(ContainElement(p.Name))
				g.Expect(p.Spec.NodeName).NotTo(Equal(drained.Name))
				g.Expect(utils.PodReady(&p)).To(BeTrue(), "pod %s", p.Name)
			}
		}).WithTimeout(multiNodePodTimeout).Should(Succeed())
		// The guarded pod and kube-proxy stay.
		p := &corev1.Pod{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(&guardedPods[0]), p)).To(Succeed())
		Expect(p.DeletionTimestamp).To(BeNil())
		Expect(utils.PodReady(p)).To(BeTrue())
		proxies := &corev1.PodList{}
		Expect(admin.List(ctx, proxies, client.InNamespace(metav1.NamespaceSystem),
			client.MatchingFields{"spec.nodeName": drained.Name})).To(Succeed())
		var names []string
		for _, p := range proxies.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		Expect(names).To(ContainElement(HavePrefix("kube-proxy")), "kube-proxy left the drained node")

		By("uncordoning " + drained.Name)
		out, err = runKubectl(ctx, cluster, "uncordon", drained.Name)
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(admin.Get(ctx, client.ObjectKey{Name: drained.Name}, node)).To(Succeed())
		Expect(node.Spec.Unschedulable).To(BeFalse())
		pinned := utils.BusyboxPod(ns, "after-uncordon", "", "true")
		pinned.Spec.NodeSelector = map[string]string{corev1.LabelHostname: drained.Name}
		expectSucceeds(ctx, admin, pinned)
		Expect(pinned.Spec.NodeName).To(Equal(drained.Name))
	}, SpecTimeout(4*multiNodePodTimeout))

	It("evicts the pods of an unreachable node and removes them from its runtime when it returns", func(ctx SpecContext) {
		failed := cluster.Nodes[2]
		d := spreadDeployment(ns, "tolerant", 3)
		d.Spec.Template.Spec.Tolerations = []corev1.Toleration{
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)},
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)},
		}
		Expect(admin.Create(ctx, d)).To(Succeed())
		pods := waitDeploymentReady(ctx, admin, ns, "tolerant", 3)
		var victims []corev1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == failed.Name {
				victims = append(victims, p)
			}
		}
		Expect(victims).To(HaveLen(1), "the spread Deployment has one pod on %s", failed.Name)
		Expect(podSandboxes(ctx, failed.Containerd, ns)).To(ContainElement(victims[0].Name))

		By("stopping the nodelet of " + failed.Name)
		Expect(cluster.StopNode(failed.Index)).To(Succeed())
		node := &corev1.Node{}
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: failed.Name}, node)).To(Succeed())
			g.Expect(node.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionUnknown))))
			g.Expect(node.Spec.Taints).To(ContainElement(And(
				HaveField("Key", corev1.TaintNodeUnreachable), HaveField("Effect", corev1.TaintEffectNoExecute))))
		}).WithTimeout(nodeFailoverTimeout).WithPolling(time.Second).Should(Succeed())

		By("waiting for the eviction after the toleration, and the replacements elsewhere")
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(&victims[0]), p)).To(Succeed())
			// Nobody confirms the deletion while the node is away.
			g.Expect(p.DeletionTimestamp).NotTo(BeNil())
		}).WithTimeout(nodeFailoverTimeout).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			var ready int
			for _, p := range deploymentPods(ctx, g, admin, ns, "tolerant") {
				if p.DeletionTimestamp == nil {
					g.Expect(p.Spec.NodeName).NotTo(Equal(failed.Name))
					if utils.PodReady(&p) {
						ready++
					}
				}
			}
			g.Expect(ready).To(Equal(3))
		}).WithTimeout(nodeFailoverTimeout).WithPolling(time.Second).Should(Succeed())
		// The stopped node's runtime still runs the evicted pod.
		Expect(podSandboxes(ctx, failed.Containerd, ns)).To(ContainElement(victims[0].Name))

		By("starting the nodelet of " + failed.Name + " again")
		Expect(cluster.StartNode(ctx, failed.Index)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: failed.Name}, node)).To(Succeed())
			g.Expect(utils.NodeReady(node)).To(BeTrue())
			g.Expect(node.Spec.Taints).NotTo(ContainElement(HaveField("Key", corev1.TaintNodeUnreachable)))
		}).WithTimeout(nodeFailoverTimeout).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			err := admin.Get(ctx, client.ObjectKeyFromObject(&victims[0]), &corev1.Pod{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "pod %s is still in the API", victims[0].Name)
			g.Expect(podSandboxes(ctx, failed.Containerd, ns)).NotTo(ContainElement(victims[0].Name))
			g.Expect(podContainers(ctx, failed.Containerd, string(victims[0].UID))).To(BeEmpty())
			g.Expect(mountsUnder(filepath.Join(failed.Nodelet.RootDir, "pods", string(victims[0].UID)))).To(BeEmpty())
		}).WithTimeout(nodeFailoverTimeout).WithPolling(time.Second).Should(Succeed())
		// Orphans stay gone rather than coming back.
		Consistently(func(g Gomega) {
			g.Expect(podSandboxes(ctx, failed.Containerd, ns)).NotTo(ContainElement(victims[0].Name))
		}).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(5*nodeFailoverTimeout))
})

// expectNodePortServes puts a NodePort Service named name in front of a
// web Deployment and fetches a page through the node port of every node of
// cluster, from the host and from a pod on node from.
func expectNodePortServes(ctx context.Context, cluster *utils.Cluster, admin client.Client, ns, name, from string) {
	GinkgoHelper()
	Expect(admin.Create(ctx, webDeployment(ns, name, 1))).To(Succeed())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(webPort)}},
		},
	}
	Expect(admin.Create(ctx, svc)).To(Succeed())
	nodePort := svc.Spec.Ports[0].NodePort
	Expect(nodePort).NotTo(BeZero())
	waitDeploymentReady(ctx, admin, ns, name, 1)
	hc := &http.Client{Timeout: 5 * time.Second}
	var urls []string
	for _, node := range cluster.Nodes {
		u := fmt.Sprintf("http://%s/", net.JoinHostPort(node.IP.String(), fmt.Sprint(nodePort)))
		urls = append(urls, u)
		Eventually(func(g Gomega) {
			resp, err := hc.Get(u)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		}).WithTimeout(multiNodePodTimeout).WithPolling(time.Second).Should(Succeed(), "the host fetching %s", u)
	}
	// Not wget -T: Debian's busybox-static wget crashes with it.
	var script []string
	for _, u := range urls {
		script = append(script, "timeout 10 wget -q -O /dev/null "+u)
	}
	pod := utils.BusyboxPod(ns, name+"-client", from, "sh", "-c", strings.Join(script, " && "))
	expectSucceeds(ctx, admin, pod)
	Expect(admin.Delete(ctx, pod)).To(Succeed())
}

// webDeployment is a Deployment of replicas utils.WebImage pods labelled
// app=name.
func webDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](2),
					Containers: []corev1.Container{{
						Name: "web", Image: utils.WebImage, ImagePullPolicy: corev1.PullNever,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(webPort)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}

// spreadDeployment is a webDeployment with at most one pod more on a node
// than on another; tainted nodes (cordoned, unreachable) do not count, so
// replacements of a lost node's pods may pile up on the others.
func spreadDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	d := webDeployment(ns, name, replicas)
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:     d.Spec.Selector,
		NodeTaintsPolicy:  ptr.To(corev1.NodeInclusionPolicyHonor),
	}}
	return d
}

// pdb is a PodDisruptionBudget of the pods labelled app=name.
func pdb(ns, name string, minAvailable int) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt(minAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		},
	}
}

// deploymentPods lists the pods labelled app=name.
func deploymentPods(ctx context.Context, g Gomega, admin client.Client, ns, name string) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(admin.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": name})).To(Succeed())
	return list.Items
}

// waitDeploymentReady waits for n Ready pods labelled app=name, none
// terminating, and returns them.
func waitDeploymentReady(ctx context.Context, admin client.Client, ns, name string, n int) []corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		pods = deploymentPods(ctx, g, admin, ns, name)
		g.Expect(pods).To(HaveLen(n))
		for _, p := range pods {
			g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s", p.Name)
			g.Expect(utils.PodReady(&p)).To(BeTrue(), "pod %s on %q: %+v", p.Name, p.Spec.NodeName, p.Status)
		}
	}).WithTimeout(multiNodePodTimeout).WithPolling(time.Second).Should(Succeed())
	return pods
}

// runKubectl runs the envtest-built kubectl with cluster's admin
// kubeconfig and returns its combined output.
func runKubectl(ctx context.Context, cluster *utils.Cluster, args ...string) (string, error) {
	cmd, err := cluster.API.Kubectl(ctx, args...)
	if err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// podSandboxes lists the pod names of every sandbox, in any state, of
// namespace ns in a containerd.
func podSandboxes(ctx context.Context, c *utils.Containerd, ns string) []string {
	GinkgoHelper()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(c.Endpoint()).WithConnectionTimeout(criTimeout).Build(ctx)
	Expect(err).NotTo(HaveOccurred())
	defer rs.Close(ctx)
	sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns},
	})
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, s := range sandboxes {
		names = append(names, s.GetMetadata().GetName())
	}
	return names
}

// podContainers lists the IDs of every container, in any state, of the pod
// with uid in a containerd.
func podContainers(ctx context.Context, c *utils.Containerd, uid string) []string {
	GinkgoHelper()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(c.Endpoint()).WithConnectionTimeout(criTimeout).Build(ctx)
	Expect(err).NotTo(HaveOccurred())
	defer rs.Close(ctx)
	containers, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
	})
	Expect(err).NotTo(HaveOccurred())
	var ids []string
	for _, ctr := range containers {
		ids = append(ids, ctr.GetId())
	}
	return ids
}
