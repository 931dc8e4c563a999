package controller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/agent"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/controller"
	"github.com/nodelet/nodelet/internal/cri"
)

// staticManifest is a static pod manifest of one busybox container; arg
// makes versions of it.
func staticManifest(name, arg string) []byte {
	return []byte(`apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: kube-system
  labels:
    component: ` + name + `
spec:
  containers:
  - name: main
    image: busybox:1.35
    command: ["sleep", "` + arg + `"]
`)
}

// staticAgent is the pod reconciler of one node over the CRI fakes, with
// a static pod directory, against restCfg (an API server that may not
// answer), its local runnables run beside the manager.
type staticAgent struct {
	node     string
	rs       *fakeruntime.FakeRuntimeService
	manifest string
}

func startStaticAgent(restCfg *rest.Config, node string, mutate ...func(*v1alpha1.NodeletConfiguration)) *staticAgent {
	GinkgoHelper()
	root := GinkgoT().TempDir()
	a := &staticAgent{node: node, rs: fakeruntime.NewFakeRuntimeService(), manifest: filepath.Join(root, "manifests")}
	Expect(os.Mkdir(a.manifest, 0o700)).To(Succeed())
	cfg := &v1alpha1.NodeletConfiguration{
		NodeName:             node,
		RootDir:              root,
		PodLogsDir:           filepath.Join(root, "logs"),
		ContainerLogLinksDir: ptr.To(filepath.Join(root, "containers")),
		HealthzBindAddress:   "0",
		MetricsBindAddress:   "0",
		ResolvConf:           ptr.To(""),
		CgroupsPerQOS:        ptr.To(false),
		StaticPodPath:        a.manifest,
		FileCheckFrequency:   metav1.Duration{Duration: time.Second},
	}
	for _, m := range mutate {
		m(cfg)
	}
	v1alpha1.SetDefaults(cfg)
	Expect(v1alpha1.Validate(cfg)).To(BeEmpty())
	rt, err := cri.New(a.rs, fakeruntime.NewFakeImageService(), cri.Options{NodeName: node})
	Expect(err).NotTo(HaveOccurred())
	store, err := checkpoint.NewFileStore(filepath.Join(root, "checkpoints"))
	Expect(err).NotTo(HaveOccurred())
	var mgr ctrl.Manager
	if restCfg == nil {
		mgr, err = agent.NewStandaloneManager(cfg)
	} else {
		mgr, err = agent.NewManager(restCfg, cfg)
	}
	Expect(err).NotTo(HaveOccurred())
	local := &agent.Local{}
	Expect(controller.Default.Setup(mgr, &controller.Deps{Config: cfg, Runtime: rt, Checkpoints: store, Local: local}, []string{"pod", "node"})).To(Succeed())
	ctx, cancel := context.WithCancel(suiteCtx)
	done := make(chan struct{})
	go func() { defer GinkgoRecover(); _ = agent.Run(ctx, local, mgr, node); close(done) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(stopTimeout).Should(BeClosed())
	})
	return a
}

func (a *staticAgent) write(file string, data []byte) {
	GinkgoHelper()
	tmp := filepath.Join(filepath.Dir(a.manifest), file+".tmp")
	Expect(os.WriteFile(tmp, data, 0o600)).To(Succeed())
	Expect(os.Rename(tmp, filepath.Join(a.manifest, file))).To(Succeed())
}

// readySandboxes returns the ready sandboxes by pod name.
func (a *staticAgent) readySandboxes() map[string]*runtimeapi.PodSandbox {
	list, err := a.rs.ListPodSandbox(context.Background(), nil)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]*runtimeapi.PodSandbox{}
	for _, sb := range list {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			out[sb.Metadata.Name] = sb
		}
	}
	return out
}

var _ = Describe("Static pods on the CRI fakes", func() {
	It("runs a static pod with no API server reachable", func() {
		node := nodeName()
		a := startStaticAgent(&rest.Config{Host: "https://127.0.0.1:1"}, node)
		a.write("web.yaml", staticManifest("web", "3600"))
		Eventually(a.readySandboxes).WithTimeout(fakePodTimeout).Should(HaveKey("web-" + node))
	})

	It("runs a static pod with no API server configured", func() {
		node := nodeName()
		a := startStaticAgent(nil, node)
		a.write("web.yaml", staticManifest("web", "3600"))
		Eventually(a.readySandboxes).WithTimeout(fakePodTimeout).Should(HaveKey("web-" + node))
	})

	It("runs the static pods of a URL, with the configured headers, beside the directory's", func() {
		node := nodeName()
		var header atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			header.Store(r.Header.Get("Authorization"))
			_, _ = w.Write(staticManifest("from-url", "3600"))
		}))
		DeferCleanup(srv.Close)
		a := startStaticAgent(nil, node, func(c *v1alpha1.NodeletConfiguration) {
			c.StaticPodURL = srv.URL
			c.StaticPodURLHeader = map[string][]string{"Authorization": {"Bearer manifests"}}
			c.HTTPCheckFrequency = metav1.Duration{Duration: time.Second}
		})
		a.write("web.yaml", staticManifest("web", "3600"))
		Eventually(a.readySandboxes).WithTimeout(fakePodTimeout).Should(And(HaveKey("from-url-"+node), HaveKey("web-"+node)))
		Expect(header.Load()).To(Equal("Bearer manifests"))
	})

	It("keeps a mirror pod for each static pod, and follows manifest changes", func(ctx SpecContext) {
		node := nodeName()
		a := startStaticAgent(nodeConfig(node), node)
		a.write("web.yaml", staticManifest("web", "3600"))
		name := "web-" + node
		mirror := func(g Gomega) *corev1.Pod {
			p := &corev1.Pod{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, p)).To(Succeed())
			return p
		}
		var first *corev1.Pod
		Eventually(func(g Gomega) {
			first = mirror(g)
			g.Expect(first.Annotations).To(HaveKey(corev1.MirrorPodAnnotationKey))
			g.Expect(first.OwnerReferences).To(ContainElement(HaveField("Kind", "Node")))
			g.Expect(first.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		staticUID := first.Annotations[corev1.MirrorPodAnnotationKey]
		Expect(a.readySandboxes()[name].Metadata.Uid).To(Equal(staticUID), "the static pod runs under its own UID, not the mirror pod's")

		By("recreating a deleted mirror pod, without restarting the static pod")
		sandbox := a.readySandboxes()[name].Id
		// With the default grace period, as kubectl deletes.
		Expect(admin.Delete(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			p := mirror(g)
			g.Expect(p.UID).NotTo(Equal(first.UID))
			g.Expect(p.Annotations[corev1.MirrorPodAnnotationKey]).To(Equal(staticUID))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.readySandboxes()[name].Id).To(Equal(sandbox))

		By("replacing the static pod and its mirror pod when the manifest changes")
		a.write("web.yaml", staticManifest("web", "7200"))
		Eventually(func(g Gomega) {
			p := mirror(g)
			g.Expect(p.Annotations[corev1.MirrorPodAnnotationKey]).NotTo(Equal(staticUID))
			g.Expect(p.Spec.Containers[0].Command).To(ContainElement("7200"))
			sb := a.readySandboxes()[name]
			g.Expect(sb).NotTo(BeNil())
			g.Expect(sb.Id).NotTo(Equal(sandbox))
			g.Expect(sb.Metadata.Uid).To(Equal(p.Annotations[corev1.MirrorPodAnnotationKey]))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.readySandboxes()).To(HaveLen(1), "the old version stopped")

		By("deleting the mirror pod when the manifest goes")
		Expect(os.Remove(filepath.Join(a.manifest, "web.yaml"))).To(Succeed())
		Eventually(func() bool {
			err := admin.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, &corev1.Pod{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(fakePodTimeout).Should(BeTrue())
		Eventually(a.readySandboxes).WithTimeout(fakePodTimeout).Should(BeEmpty())
	})

	It("takes its name back from a pod that holds it, and reports one it may not delete", func(ctx SpecContext) {
		node := nodeName()
		By("a tenant's pod bound to the node with the static pod's name, made before the manifest")
		bound := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-" + node},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox:1.35", Command: []string{"sleep", "3600"}}}},
		}
		Expect(admin.Create(ctx, bound)).To(Succeed())
		By("another with the name of a second static pod, bound to another node")
		elsewhere := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-" + node},
			Spec:       corev1.PodSpec{NodeName: node + "-other", Containers: []corev1.Container{{Name: "c", Image: "busybox:1.35"}}},
		}
		Expect(admin.Create(ctx, elsewhere)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = admin.Delete(ctx, elsewhere, client.GracePeriodSeconds(0)) })

		a := startStaticAgent(nodeConfig(node), node)
		manifest := func(name string) []byte {
			return []byte(strings.ReplaceAll(string(staticManifest(name, "3600")), "namespace: kube-system", "namespace: default"))
		}
		a.write("web.yaml", manifest("web"))
		a.write("db.yaml", manifest("db"))
		Eventually(a.readySandboxes).WithTimeout(fakePodTimeout).Should(And(HaveKey("web-"+node), HaveKey("db-"+node)),
			"both static pods run, whoever holds their names")

		events := func(g Gomega, name string) []corev1.Event {
			var list corev1.EventList
			g.Expect(admin.List(ctx, &list, client.InNamespace("default"),
				client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.name", name)})).To(Succeed())
			return list.Items
		}
		By("deleting the pod bound to the node, with an Event on it, and making the mirror pod")
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(bound), p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(bound.UID))
			g.Expect(p.Annotations).To(HaveKey(corev1.MirrorPodAnnotationKey))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Eventually(func(g Gomega) []corev1.Event { return events(g, bound.Name) }).WithTimeout(fakePodTimeout).Should(ContainElement(And(
			HaveField("Reason", controller.EventStaticPodNameConflict),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("InvolvedObject.UID", bound.UID),
		)))
		Eventually(func() []string {
			var uids []string
			for _, sb := range a.readySandboxes() {
				uids = append(uids, sb.Metadata.Uid)
			}
			return uids
		}).WithTimeout(fakePodTimeout).ShouldNot(ContainElement(string(bound.UID)), "whatever of the holder ran (before the manifest was read) stopped")

		By("reporting the pod bound elsewhere on the static pod, and leaving it")
		Eventually(func(g Gomega) []corev1.Event { return events(g, elsewhere.Name) }).WithTimeout(fakePodTimeout).Should(ContainElement(And(
			HaveField("Reason", controller.EventStaticPodNameConflict),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("InvolvedObject.UID", Equal(types.UID(a.readySandboxes()["db-"+node].Metadata.Uid))),
			// The Node authorizer lets a node read only its own pods.
			HaveField("Message", And(ContainSubstring("default/db-"+node), ContainSubstring("not bound to this node"))),
		)))
		p := &corev1.Pod{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(elsewhere), p)).To(Succeed())
		Expect(p.UID).To(Equal(elsewhere.UID), "a node may not delete another node's pod")
		conflicts := func(g Gomega) []corev1.Event {
			var out []corev1.Event
			for _, e := range events(g, elsewhere.Name) {
				if e.Reason == controller.EventStaticPodNameConflict {
					out = append(out, e)
				}
			}
			return out
		}
		Consistently(conflicts).WithTimeout(3*time.Second).Should(
			And(HaveLen(1), HaveEach(HaveField("Count", BeNumerically("<=", 1)))), "one Event for one holder, not one a retry")
	})

	It("reports a manifest it cannot use on the Node and runs the others", func(ctx SpecContext) {
		node := nodeName()
		a := startStaticAgent(nodeConfig(node), node)
		a.write("good.yaml", staticManifest("good", "3600"))
		a.write("bad.yaml", []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers: [{name: c}]\n"))
		Eventually(a.readySandboxes).WithTimeout(fakePodTimeout).Should(HaveKey("good-" + node))
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(admin.List(ctx, &events, client.InNamespace("default"),
				client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.name", node)})).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("Reason", controller.EventFailedValidation),
				HaveField("Type", corev1.EventTypeWarning),
				HaveField("Message", ContainSubstring("bad.yaml")),
			)))
		}).WithTimeout(fakePodTimeout).Should(Succeed())
		Expect(a.readySandboxes()).NotTo(HaveKey("bad-" + node))
	})
})
